// inprocess: runs models written in Python (tritonserver.PythonModel, or a
// python-backend model.py) inside the interpreter that runs the server.
//
// The core schedules the model as any other (batching, instances, sequences,
// decoupled, statistics); this backend takes the GIL only around its calls
// into Python, hands each request's inputs over as zero-copy buffers, and
// copies the outputs Python returns into the core's buffers. The Python side
// is tritonserver._inprocess._dispatch: it finds the model's class, runs the
// hooks and validates what execute returns.
//
// Built on the SDK for its lifecycle hooks; Execute is its own entry point
// because a request may outlive the call (a decoupled response sender, an
// input array the model kept): each request is released when its Python
// handle is garbage (handle.h).
#include <dlfcn.h>

#include "handle.h"

namespace inprocess {
namespace {

Runtime runtime;

Ref Import(const char* module) {
  Ref ref(PyImport_ImportModule(module));
  if (!ref) throw TakePythonError();
  return ref;
}

PyObject* Function(PyObject* module, const char* name) {
  PyObject* fn = PyObject_GetAttrString(module, name);
  if (fn == nullptr) throw TakePythonError();
  return fn;
}

// The backend's library stays loaded until the process exits: Python
// objects of its types may outlive the core's use of it.
void PinLibrary() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&PinLibrary), &info) != 0 &&
      info.dli_fname != nullptr) {
    dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  }
}

Ref Call(PyObject* fn, std::initializer_list<PyObject*> args) {
  Ref tuple(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  if (!tuple) throw TakePythonError();
  Py_ssize_t i = 0;
  for (PyObject* arg : args) {
    if (arg == nullptr) throw TakePythonError();  // a failed conversion
    PyTuple_SET_ITEM(tuple.get(), i++, arg);      // steals
  }
  Ref result(PyObject_Call(fn, tuple.get(), nullptr));
  if (!result) throw TakePythonError();
  return result;
}

PyObject* Borrowed(PyObject* obj) {
  Py_INCREF(obj);
  return obj;
}

void RequirePython() {
  if (!PythonAlive()) {
    throw tb::Error::Unavailable(
        "the inprocess backend runs Python models inside the Python process "
        "of the tritonserver package, and that interpreter is not running");
  }
}

struct ModelState {
  explicit ModelState(PyObject* owned) : loaded(owned) {}
  Kept loaded;  // what _dispatch.load_model returned
};

struct InstanceState {
  explicit InstanceState(PyObject* owned) : instance(owned) {}
  Kept instance;  // what _dispatch.initialize_instance returned
};

// The model configuration as the core's JSON (64-bit numbers as strings).
std::string ConfigJson(const tb::Model& model) {
  TRITONSERVER_Message* message = nullptr;
  tb::Check(TRITONBACKEND_ModelConfig(model.handle(), 1, &message));
  tb::detail::MessagePtr owned(message);
  return tb::detail::MessageJson(message);
}

class InProcess : public tb::Backend {
 public:
  void Initialize() override {
    RequirePython();
    PinLibrary();
    Gil gil;
    LoadRuntime();
  }

  void ModelInitialize(tb::Model& model) override {
    RequirePython();
    const std::string config = ConfigJson(model);
    Gil gil;
    Ref loaded = Call(
        runtime.load_model,
        {PyUnicode_FromString(model.name().c_str()),
         PyLong_FromUnsignedLongLong(model.version()),
         PyUnicode_FromString(config.c_str()),
         PyUnicode_FromString(model.repository_path().c_str())});
    model.EmplaceState<ModelState>(loaded.release());
  }

  void ModelFinalize(tb::Model& model) override {
    if (!PythonAlive() || !model.has_state()) return;
    Gil gil;
    Call(runtime.finalize_model, {Borrowed(model.State<ModelState>().loaded.get())});
  }

  void InstanceInitialize(tb::Instance& instance) override {
    RequirePython();
    Gil gil;
    Ref made = Call(
        runtime.initialize_instance,
        {Borrowed(instance.model().State<ModelState>().loaded.get()),
         PyUnicode_FromString(instance.name().c_str()),
         PyUnicode_FromString(TRITONSERVER_InstanceGroupKindString(instance.kind())),
         PyLong_FromLong(instance.device_id())});
    instance.EmplaceState<InstanceState>(made.release());
  }

  void InstanceFinalize(tb::Instance& instance) override {
    if (!PythonAlive() || !instance.has_state()) return;
    Gil gil;
    Call(runtime.finalize_instance,
         {Borrowed(instance.model().State<ModelState>().loaded.get()),
          Borrowed(instance.State<InstanceState>().instance.get())});
  }

  void Execute(tb::Instance&, tb::Requests&) override {
    // Never called: TRITONBACKEND_ModelInstanceExecute below runs batches.
    throw tb::Error::Internal("inprocess: unexpected SDK Execute");
  }
};

void FailAndRelease(TRITONBACKEND_Request* request, TRITONSERVER_Error_Code code,
                    const char* message) {
  TRITONBACKEND_Response* response = nullptr;
  TRITONSERVER_Error* error = TRITONBACKEND_ResponseNew(&response, request);
  if (error == nullptr) {
    tb::detail::ErrorPtr reason(TRITONSERVER_ErrorNew(code, message));
    error = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                                       reason.get());
  }
  tb::detail::LogIfError(error, "sending an error response");
  tb::detail::LogIfError(
      TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL),
      "releasing a request");
}

// One batch: the requests become handles, Python runs the model, then the
// batch's statistics; each request is released when its handle dies.
TRITONSERVER_Error* Execute(TRITONBACKEND_ModelInstance* handle,
                            TRITONBACKEND_Request** requests,
                            uint32_t count) noexcept {
  const uint64_t exec_start = tb::detail::NowNs();
  tb::Instance* instance = nullptr;
  if (TRITONSERVER_Error* error = tb::Guard([&] {
        void* state = nullptr;
        tb::Check(TRITONBACKEND_ModelInstanceState(handle, &state));
        instance = static_cast<tb::Instance*>(state);
        if (instance == nullptr || !instance->has_state() ||
            !instance->model().has_state()) {
          throw tb::Error::Internal("the instance was not initialized");
        }
      })) {
    return error;  // the requests are still the core's, which fails them
  }
  // Requests cancelled while queued, or arriving while Python shuts down,
  // are answered here without entering Python.
  std::vector<TRITONBACKEND_Request*> active;
  active.reserve(count);
  const bool alive = PythonAlive();
  for (uint32_t i = 0; i < count; ++i) {
    bool cancelled = false;
    tb::detail::LogIfError(TRITONBACKEND_RequestIsCancelled(requests[i], &cancelled),
                           "checking for cancellation");
    if (cancelled) {
      FailAndRelease(requests[i], TRITONSERVER_ERROR_CANCELLED,
                     "the request was cancelled before it was executed");
    } else if (!alive) {
      FailAndRelease(requests[i], TRITONSERVER_ERROR_UNAVAILABLE,
                     "the Python interpreter is shutting down");
    } else {
      active.push_back(requests[i]);
    }
  }
  if (active.empty()) return nullptr;

  InstanceGil gil;
  const uint64_t call_start = tb::detail::NowNs();
  Ref batch(PyList_New(0));
  size_t made = 0;
  for (; batch && made < active.size(); ++made) {
    Ref h(NewHandle(active[made], *instance, exec_start, call_start));
    if (!h || PyList_Append(batch.get(), h.get()) != 0) break;
  }
  if (made < active.size()) {  // out of memory: the rest never reach Python
    PyErr_Clear();
    NoGil unlocked;
    for (size_t i = made; i < active.size(); ++i) {
      FailAndRelease(active[i], TRITONSERVER_ERROR_INTERNAL,
                     "out of memory while preparing the batch");
    }
  }
  if (!batch) return nullptr;
  const Py_ssize_t size = PyList_GET_SIZE(batch.get());
  PyObject* loaded = instance->model().State<ModelState>().loaded.get();
  Ref done(PyObject_CallFunctionObjArgs(runtime.execute, loaded,
                                        instance->State<InstanceState>().instance.get(),
                                        batch.get(), nullptr));
  const uint64_t call_end = tb::detail::NowNs();
  std::optional<tb::Error> thrown;
  if (!done) thrown.emplace(TakePythonError());
  const bool decoupled = instance->model().decoupled();
  uint64_t batch_size = 0;
  for (Py_ssize_t i = 0; i < size; ++i) {
    PyObject* h = PyList_GET_ITEM(batch.get(), i);
    // A decoupled request whose handle Python kept (a response sender)
    // may still be answered; any other request must be answered by now.
    const bool kept = decoupled && Py_REFCNT(h) > 1;
    if (!HandleFinished(h) && !kept) {
      try {
        if (thrown) {
          HandleFail(h, thrown->code(), thrown->message());
        } else {
          HandleFail(h, TRITONSERVER_ERROR_INTERNAL,
                     "execute returned without a final response for this "
                     "request");
        }
      } catch (const std::exception&) {
      }
    }
    if (!HandleFailed(h)) batch_size += HandleBatchSize(h);
  }
  if (batch_size > 0) {
    tb::detail::LogIfError(
        TRITONBACKEND_ModelInstanceReportBatchStatistics(
            handle, batch_size, exec_start, call_start, call_end,
            tb::detail::NowNs()),
        "reporting batch statistics");
  }
  return nullptr;  // `batch` dies here: unkept handles release their requests
}

}  // namespace

Runtime& TheRuntime() { return runtime; }

void LoadRuntime() {
  if (runtime.execute != nullptr) return;  // a later Initialize in the process
  Ref module = Import("tritonserver._inprocess._dispatch");
  Runtime loaded;
  loaded.describe_error = Function(module.get(), "describe_error");
  runtime.describe_error = loaded.describe_error;  // used by the next throws
  loaded.error_from_code = Function(module.get(), "error_from_code");
  loaded.load_model = Function(module.get(), "load_model");
  loaded.finalize_model = Function(module.get(), "finalize_model");
  loaded.initialize_instance = Function(module.get(), "initialize_instance");
  loaded.finalize_instance = Function(module.get(), "finalize_instance");
  loaded.handle_type = MakeHandleType();
  loaded.input_type = MakeInputBufferType();
  if (loaded.handle_type == nullptr || loaded.input_type == nullptr) {
    throw TakePythonError();
  }
  loaded.execute = Function(module.get(), "execute");
  runtime = loaded;  // kept for the process's lifetime
}

void RaiseTritonError(TRITONSERVER_Error_Code code, const std::string& message) {
  if (runtime.error_from_code != nullptr) {
    Ref error(PyObject_CallFunction(runtime.error_from_code, "is", int(code),
                                    message.c_str()));
    if (error) {
      PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.get())), error.get());
      return;
    }
    PyErr_Clear();
  }
  PyErr_SetString(PyExc_RuntimeError, message.c_str());
}

}  // namespace inprocess

// The seven entry points: the SDK's lifecycle, our own Execute.
extern "C" {
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Initialize(
    TRITONBACKEND_Backend* backend) {
  return tritonserver::backend::detail::Initialize(
      backend, []() -> std::unique_ptr<tritonserver::backend::Backend> {
        return std::make_unique<inprocess::InProcess>();
      });
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Finalize(
    TRITONBACKEND_Backend* backend) {
  return tritonserver::backend::detail::Finalize(backend);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(
    TRITONBACKEND_Model* model) {
  return tritonserver::backend::detail::ModelInitialize(model);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(
    TRITONBACKEND_Model* model) {
  return tritonserver::backend::detail::ModelFinalize(model);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance* instance) {
  return tritonserver::backend::detail::InstanceInitialize(instance);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance* instance) {
  return tritonserver::backend::detail::InstanceFinalize(instance);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count) {
  return inprocess::Execute(instance, requests, request_count);
}
}
