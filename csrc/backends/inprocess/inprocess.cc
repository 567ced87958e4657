// inprocess: runs models written in Python (tritonserver.PythonModel, or a
// python-backend model.py) inside the interpreter that runs the server.
//
// An ordinary SDK backend: the core schedules the model as any other
// (batching, instances, sequences, decoupled, statistics), and the SDK
// answers, reports and releases requests. This backend takes the GIL only
// around its calls into Python, hands each request over as a RequestHandle
// (handle.h) whose inputs are zero-copy buffers, and copies the outputs
// Python returns into the core's buffers. A request whose handle Python
// still holds when execute returns (a decoupled response sender, a kept
// input array) is kept past Execute (tb::Requests::Keep) and released when
// the handle is garbage. The Python side is tritonserver._inprocess._dispatch:
// it finds the model's class, runs the hooks and checks what execute
// returns.
//
// The backend is only ever loaded into a Python process (by the tritonserver
// package): its Py* symbols resolve against that process's interpreter, and
// it is never linked to libpython.
#include <dlfcn.h>

#include "handle.h"
#include "metrics.h"
#include "pyinterop/errors.h"
#include "pyinterop/gil.h"
#include "pyinterop/ref.h"

namespace inprocess {
namespace {

// What the backend calls in Python: tritonserver._inprocess._dispatch
// functions. Made once per process and never freed (Python objects of this
// backend's types may outlive the core's use of it).
struct Runtime {
  py::object complete_config;
  py::object load_model;
  py::object finalize_model;
  py::object initialize_instance;
  py::object finalize_instance;
  py::object execute;
};

Runtime* runtime = nullptr;

// The backend's library stays loaded until the process exits, for the same
// reason.
void PinLibrary() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&PinLibrary), &info) != 0 && info.dli_fname != nullptr) {
    dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  }
}

// With the GIL, once per process: the module of our types, then the
// dispatch functions.
void LoadRuntime() {
  if (runtime != nullptr) return;
  py::module_ types =
      py::reinterpret_steal<py::module_>(PyModule_New("tritonserver._inprocess._backend"));
  if (!types) throw py::error_already_set();
  RegisterHandleTypes(types);
  RegisterMetricTypes(types);
  // pb_utils.Logger: a line of the server's log (its levels are the core's
  // and the python backend's alike), naming the model's file and line.
  types.def(
      "log",
      [](int level, const std::string& file, int line, const std::string& message) {
        if (level < TRITONSERVER_LOG_INFO || level > TRITONSERVER_LOG_VERBOSE) {
          throw tb::Error::InvalidArgument("log level must be INFO, WARNING, ERROR or VERBOSE");
        }
        const auto core_level = static_cast<TRITONSERVER_LogLevel>(level);
        if (!TRITONSERVER_LogIsEnabled(core_level)) return;
        tb::Check(TRITONSERVER_LogMessage(core_level, file.c_str(), line, message.c_str()));
      },
      py::arg("level"), py::arg("file"), py::arg("line"), py::arg("message"),
      py::call_guard<py::gil_scoped_release>());
  pyinterop::RegisterErrorTranslator();
  // A second copy of this library (the core loads it by another name where
  // no hard link could be made) keeps the first's module: its types work
  // on its own objects whichever module Python imports.
  py::dict modules = py::module_::import("sys").attr("modules");
  if (!modules.contains("tritonserver._inprocess._backend")) {
    modules["tritonserver._inprocess._backend"] = types;
  }
  py::module_ dispatch = py::module_::import("tritonserver._inprocess._dispatch");
  // send() reads each Output by position: its fields must be these.
  py::object fields =
      py::module_::import("tritonserver._inprocess._response").attr("Output").attr("_fields");
  if (!fields.equal(py::make_tuple("name", "datatype", "shape", "data"))) {
    throw tb::Error::Internal(
        "tritonserver._inprocess._response.Output changed its fields; update "
        "the inprocess backend's ParseOutput");
  }
  runtime = new Runtime{dispatch.attr("complete_config"),   dispatch.attr("load_model"),
                        dispatch.attr("finalize_model"),    dispatch.attr("initialize_instance"),
                        dispatch.attr("finalize_instance"), dispatch.attr("execute")};
}

// The GIL for a call into Python; Unavailable when the interpreter is not
// running (finalizing, or never started in this process).
class PythonGil {
 public:
  PythonGil() {
    if (!gil_.held()) {
      throw tb::Error::Unavailable(
          "the inprocess backend runs Python models inside the Python process "
          "of the tritonserver package, and that interpreter is not running");
    }
  }

 private:
  pyinterop::AcquireGil gil_;
};

// Calls into Python; a Python exception becomes an Error with the code and
// message tritonserver._errors gives it.
template <typename Fn>
py::object CallPython(Fn&& fn) {
  try {
    return fn();
  } catch (py::error_already_set&) {
    pyinterop::ThrowAsError();
  }
}

// Where the model's backend lives (the folder of its library, or of a
// python-based backend's model.py) and the server that loaded it (its
// TRITONSERVER_Server* as an int, for calls back into it: BLS).
py::tuple ModelPlace(tb::Model& model) {
  const char* location = nullptr;
  TRITONBACKEND_ArtifactType type = TRITONBACKEND_ARTIFACT_FILESYSTEM;
  tb::Check(TRITONBACKEND_BackendArtifacts(model.backend().handle(), &type, &location));
  TRITONSERVER_Server* server = nullptr;
  tb::Check(TRITONBACKEND_ModelServer(model.handle(), &server));
  return py::make_tuple(model.backend().name(), location != nullptr ? location : "",
                        reinterpret_cast<uintptr_t>(server));
}

struct ModelState {
  pyinterop::OwnedRef loaded;  // what _dispatch.load_model returned
};

struct InstanceState {
  pyinterop::OwnedRef instance;  // what _dispatch.initialize_instance returned
};

class InProcess : public tb::Backend {
 public:
  void Initialize() override {
    PinLibrary();
    PythonGil gil;
    CallPython([] {
      LoadRuntime();
      return py::none();
    });
  }

  void ModelInitialize(tb::Model& model) override {
    PythonGil gil;
    if (model.AutoCompleteAllowed()) {  // the model's runtime may complete its configuration
      py::object completed = CallPython([&] {
        return runtime->complete_config(model.name(), model.version(), model.config_text(),
                                        model.repository_path(), model.backend().config_text(),
                                        ModelPlace(model));
      });
      if (!completed.is_none()) model.SetConfig(completed.cast<std::string>());
    }
    py::object loaded = CallPython([&] {
      return runtime->load_model(model.name(), model.version(), model.config_text(),
                                 model.repository_path(), ModelPlace(model));
    });
    model.EmplaceState<ModelState>(ModelState{pyinterop::OwnedRef(loaded)});
  }

  void ModelFinalize(tb::Model& model) override {
    if (!model.has_state()) return;
    pyinterop::AcquireGil gil;
    if (!gil.held()) return;
    CallPython([&] { return runtime->finalize_model(model.State<ModelState>().loaded.handle()); });
  }

  void InstanceInitialize(tb::Instance& instance) override {
    PythonGil gil;
    py::object made = CallPython([&] {
      return runtime->initialize_instance(
          instance.model().State<ModelState>().loaded.handle(), instance.name(),
          TRITONSERVER_InstanceGroupKindString(instance.kind()), instance.device_id());
    });
    instance.EmplaceState<InstanceState>(InstanceState{pyinterop::OwnedRef(made)});
  }

  void InstanceFinalize(tb::Instance& instance) override {
    if (!instance.has_state()) return;
    pyinterop::AcquireGil gil;
    if (!gil.held()) return;
    CallPython([&] {
      return runtime->finalize_instance(instance.model().State<ModelState>().loaded.handle(),
                                        instance.State<InstanceState>().instance.handle());
    });
  }

  // One batch: each request becomes a RequestHandle and Python runs the
  // model. Requests cancelled while queued never get here (the SDK).
  void Execute(tb::Instance& instance, tb::Requests& requests) override {
    PythonGil gil;
    py::list batch(requests.size());
    std::vector<RequestHandle*> handles;
    handles.reserve(requests.size());
    size_t i = 0;
    for (tb::Request& request : requests) {
      auto handle = std::make_unique<RequestHandle>(request);
      handles.push_back(handle.get());
      batch[i++] = py::cast(std::move(handle));
    }
    std::optional<tb::Error> thrown;
    try {
      CallPython([&] {
        return runtime->execute(instance.model().State<ModelState>().loaded.handle(),
                                instance.State<InstanceState>().instance.handle(), batch);
      });
    } catch (const tb::Error& e) {
      thrown = e;
    } catch (const std::exception& e) {  // the loop below must still run
      thrown = tb::Error::Internal(e.what());
    }
    const bool decoupled = instance.model().decoupled();
    for (size_t k = 0; k < handles.size(); ++k) {
      RequestHandle& handle = *handles[k];
      // Python still holds it (beyond our list): a decoupled request, or
      // one whose answer Python deferred (a coroutine still running), may
      // still be answered; any other request must be answered by now.
      const bool kept = Py_REFCNT(PyList_GET_ITEM(batch.ptr(), k)) > 1;
      // A rescheduled request goes back to its scheduler unanswered.
      const bool rescheduled = handle.request().rescheduled();
      if (!rescheduled && !((decoupled || handle.deferred()) && kept)) {
        handle.FailIfOpen(thrown ? thrown->code() : TRITONSERVER_ERROR_INTERNAL,
                          thrown ? thrown->message()
                                 : "execute returned without a final response "
                                   "for this request");
      }
      if (kept) handle.Own(requests.Keep(handle.request()));
    }
  }  // `batch` dies here: the handles Python did not keep go with it
};

}  // namespace
}  // namespace inprocess

TRITONSERVER_BACKEND(inprocess::InProcess)
