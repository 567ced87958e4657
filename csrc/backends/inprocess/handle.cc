// RequestHandle and InputBuffer (see handle.h).
#include "handle.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

namespace inprocess {
namespace {

struct HandleObject {
  PyObject_HEAD
  TRITONBACKEND_Request* raw;
  tb::Request* request;  // owned; null in a handle not made by NewHandle
  std::mutex* mu;        // owned; guards `request` (taken without the GIL)
  uint64_t exec_start;
  uint64_t compute_start;
  bool reported;         // statistics sent (once, at the final response)
};

struct InputBufferObject {
  PyObject_HEAD
  PyObject* owner;  // the RequestHandle whose request holds the data
  const void* data;
  Py_ssize_t size;
  int memory_type;
  int64_t memory_type_id;
  char* gathered;  // owned copy of a tensor that came in several buffers
};

// Runs fn (which returns a new reference or null with an error set),
// turning a C++ exception into the matching tritonserver error.
template <typename Fn>
PyObject* Guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const tb::Error& e) {
    RaiseTritonError(e.code(), e.message());
  } catch (const std::exception& e) {
    RaiseTritonError(TRITONSERVER_ERROR_INTERNAL, e.what());
  }
  return nullptr;
}

HandleObject* Live(PyObject* self) {
  auto* h = reinterpret_cast<HandleObject*>(self);
  if (h->request == nullptr) {
    throw tb::Error::InvalidArgument("not a request handle of the backend");
  }
  return h;
}

// After the final response: the request's statistics (with the mutex).
void Report(HandleObject* h, bool success) noexcept {
  if (h->reported) return;
  h->reported = true;
  const uint64_t now = tb::detail::NowNs();
  const uint64_t start = h->compute_start < now ? h->compute_start : now;
  tb::detail::LogIfError(
      TRITONBACKEND_ModelInstanceReportStatistics(
          h->request->instance().handle(), h->raw, success, h->exec_start,
          start, now, now),
      "reporting request statistics");
}

void FailLocked(HandleObject* h, TRITONSERVER_Error_Code code,
                const char* message) noexcept {
  if (h->request->finished()) return;
  h->request->Fail(code, message);
  Report(h, false);
}

std::vector<int64_t> Shape(PyObject* sequence) {
  Ref fast(PySequence_Fast(sequence, "a shape must be a sequence of ints"));
  if (!fast) throw tb::Error::InvalidArgument("a shape must be a sequence of ints");
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast.get());
  std::vector<int64_t> shape(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    shape[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast.get(), i));
    if (shape[i] == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      throw tb::Error::InvalidArgument("a shape must be a sequence of ints");
    }
  }
  return shape;
}

// ---- What Python gives send(): parsed with the GIL, used without it --------

struct Output {
  std::string name;
  TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape;
  Py_buffer view{};
  bool held = false;
};

struct Parameter {
  std::string name;
  TRITONSERVER_ParameterType type = TRITONSERVER_PARAMETER_STRING;
  std::string text;
  int64_t integer = 0;
  double real = 0;
  bool flag = false;
};

struct Outputs {
  std::vector<Output> items;
  ~Outputs() {  // with the GIL (send() reacquires it before this runs)
    for (Output& out : items) {
      if (out.held) PyBuffer_Release(&out.view);
    }
  }
};

void ParseOutputs(PyObject* outputs, Outputs& parsed) {
  Ref fast(PySequence_Fast(outputs, "outputs must be a sequence"));
  if (!fast) throw tb::Error::InvalidArgument("outputs must be a sequence");
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast.get());
  parsed.items.resize(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    const char* name = nullptr;
    int dtype = 0;
    PyObject* shape = nullptr;
    PyObject* data = nullptr;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast.get(), i), "siOO",
                          &name, &dtype, &shape, &data)) {
      PyErr_Clear();
      throw tb::Error::InvalidArgument(
          "each output must be (name, datatype, shape, buffer)");
    }
    Output& out = parsed.items[i];
    out.name = name;
    out.dtype = static_cast<TRITONSERVER_DataType>(dtype);
    out.shape = Shape(shape);
    if (PyObject_GetBuffer(data, &out.view, PyBUF_C_CONTIGUOUS) != 0) {
      PyErr_Clear();
      throw tb::Error::InvalidArgument("output '" + out.name +
                                       "': the data is not a contiguous buffer");
    }
    out.held = true;
    const uint64_t element = tb::ElementByteSize(out.dtype);
    if (element != 0 && tb::ElementCount(out.shape) * element !=
                            static_cast<uint64_t>(out.view.len)) {
      throw tb::Error::InvalidArgument(
          "output '" + out.name + "': " + std::to_string(out.view.len) +
          " bytes do not fill shape " + tb::ShapeString(out.shape));
    }
  }
}

std::vector<Parameter> ParseParameters(PyObject* parameters) {
  std::vector<Parameter> parsed;
  if (parameters == Py_None) return parsed;
  if (!PyDict_Check(parameters)) {
    throw tb::Error::InvalidArgument("response parameters must be a dict");
  }
  PyObject* key = nullptr;
  PyObject* value = nullptr;
  Py_ssize_t pos = 0;
  while (PyDict_Next(parameters, &pos, &key, &value)) {
    Parameter p;
    const char* name = PyUnicode_Check(key) ? PyUnicode_AsUTF8(key) : nullptr;
    if (name == nullptr) {
      PyErr_Clear();
      throw tb::Error::InvalidArgument("response parameter names must be str");
    }
    p.name = name;
    if (PyBool_Check(value)) {
      p.type = TRITONSERVER_PARAMETER_BOOL;
      p.flag = value == Py_True;
    } else if (PyLong_Check(value)) {
      p.type = TRITONSERVER_PARAMETER_INT;
      p.integer = PyLong_AsLongLong(value);
      if (p.integer == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        throw tb::Error::InvalidArgument("response parameter '" + p.name +
                                         "' does not fit in 64 bits");
      }
    } else if (PyFloat_Check(value)) {
      p.type = TRITONSERVER_PARAMETER_DOUBLE;
      p.real = PyFloat_AsDouble(value);
    } else if (PyUnicode_Check(value)) {
      const char* text = PyUnicode_AsUTF8(value);
      if (text == nullptr) {
        PyErr_Clear();
        throw tb::Error::InvalidArgument("response parameter '" + p.name +
                                         "' is not valid text");
      }
      p.text = text;
    } else {
      throw tb::Error::InvalidArgument(
          "response parameter '" + p.name + "' must be str, int, bool or float");
    }
    parsed.push_back(std::move(p));
  }
  return parsed;
}

// ---- RequestHandle methods ----------------------------------------------------

PyObject* HandleSend(PyObject* self, PyObject* args) {
  return Guarded([&]() -> PyObject* {
    PyObject* outputs = nullptr;
    PyObject* parameters = Py_None;
    int final = 1;
    if (!PyArg_ParseTuple(args, "O|Op", &outputs, &parameters, &final)) {
      return nullptr;
    }
    HandleObject* h = Live(self);
    Outputs parsed;
    ParseOutputs(outputs, parsed);
    const std::vector<Parameter> params = ParseParameters(parameters);
    std::optional<tb::Error> failure;
    {
      NoGil unlocked;  // copies and the send (which runs callbacks) without it
      std::lock_guard<std::mutex> lock(*h->mu);
      try {
        tb::Response response = h->request->NewResponse();
        for (const Output& out : parsed.items) {
          tb::OutputTensor tensor = response.AddOutput(
              out.name, out.dtype, out.shape, static_cast<uint64_t>(out.view.len));
          if (out.view.len != 0) std::memcpy(tensor.data(), out.view.buf, out.view.len);
        }
        for (const Parameter& p : params) {
          switch (p.type) {
            case TRITONSERVER_PARAMETER_BOOL:
              response.SetBoolParameter(p.name, p.flag);
              break;
            case TRITONSERVER_PARAMETER_INT:
              response.SetIntParameter(p.name, p.integer);
              break;
            case TRITONSERVER_PARAMETER_DOUBLE:
              response.SetDoubleParameter(p.name, p.real);
              break;
            default:
              response.SetStringParameter(p.name, p.text);
          }
        }
        response.Send(final != 0);
        if (final) Report(h, true);
      } catch (const tb::Error& e) {
        failure.emplace(e);
      }
    }
    if (failure) throw *failure;
    Py_RETURN_NONE;
  });
}

PyObject* HandleFailMethod(PyObject* self, PyObject* args) {
  return Guarded([&]() -> PyObject* {
    int code = TRITONSERVER_ERROR_INTERNAL;
    const char* message = nullptr;
    if (!PyArg_ParseTuple(args, "is", &code, &message)) return nullptr;
    HandleFail(self, static_cast<TRITONSERVER_Error_Code>(code), message);
    Py_RETURN_NONE;
  });
}

PyObject* HandleFinish(PyObject* self, PyObject*) {
  return Guarded([&]() -> PyObject* {
    HandleObject* h = Live(self);
    std::optional<tb::Error> failure;
    {
      NoGil unlocked;
      std::lock_guard<std::mutex> lock(*h->mu);
      try {
        h->request->Finish();
        Report(h, true);
      } catch (const tb::Error& e) {
        failure.emplace(e);
      }
    }
    if (failure) throw *failure;
    Py_RETURN_NONE;
  });
}

PyObject* HandleIsCancelled(PyObject* self, PyObject*) {
  return Guarded([&]() -> PyObject* {
    HandleObject* h = Live(self);
    bool cancelled = false;
    std::optional<tb::Error> failure;
    {
      NoGil unlocked;
      std::lock_guard<std::mutex> lock(*h->mu);
      try {
        cancelled = !h->request->finished() && h->request->IsCancelled();
      } catch (const tb::Error& e) {
        failure.emplace(e);
      }
    }
    if (failure) throw *failure;
    return PyBool_FromLong(cancelled);
  });
}

PyObject* NewInputBuffer(PyObject* owner, const tb::InputTensor& tensor) {
  const std::vector<tb::Buffer>& buffers = tensor.buffers();
  const void* data = nullptr;
  int memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
  std::unique_ptr<char[]> gathered;
  if (buffers.size() == 1) {
    data = buffers[0].data;
    memory_type = buffers[0].memory_type;
    memory_type_id = buffers[0].memory_type_id;
  } else if (buffers.size() > 1) {
    if (!tensor.in_host_memory()) {
      throw tb::Error::Unsupported("input '" + tensor.name() +
                                   "' came in several device buffers");
    }
    gathered.reset(new char[tensor.byte_size()]);
    tensor.CopyTo(gathered.get());
    data = gathered.get();
  }
  PyObject* obj =
      PyType_GenericAlloc(reinterpret_cast<PyTypeObject*>(TheRuntime().input_type), 0);
  if (obj == nullptr) return nullptr;
  auto* b = reinterpret_cast<InputBufferObject*>(obj);
  Py_INCREF(owner);
  b->owner = owner;
  b->data = data;
  b->size = static_cast<Py_ssize_t>(tensor.byte_size());
  b->memory_type = memory_type;
  b->memory_type_id = memory_type_id;
  b->gathered = gathered.release();
  return obj;
}

PyObject* ShapeTuple(const std::vector<int64_t>& shape) {
  Ref tuple(PyTuple_New(static_cast<Py_ssize_t>(shape.size())));
  if (!tuple) return nullptr;
  for (size_t i = 0; i < shape.size(); ++i) {
    PyObject* dim = PyLong_FromLongLong(shape[i]);
    if (dim == nullptr) return nullptr;
    PyTuple_SET_ITEM(tuple.get(), static_cast<Py_ssize_t>(i), dim);
  }
  return tuple.release();
}

// ((name, datatype, shape, InputBuffer, memory_type, memory_type_id), ...)
PyObject* HandleInputs(PyObject* self, PyObject*) {
  return Guarded([&]() -> PyObject* {
    HandleObject* h = Live(self);
    uint32_t count = 0;
    tb::Check(TRITONBACKEND_RequestInputCount(h->raw, &count));
    Ref tuple(PyTuple_New(count));
    if (!tuple) return nullptr;
    for (uint32_t i = 0; i < count; ++i) {
      const tb::InputTensor tensor = h->request->Input(i);
      Ref buffer(NewInputBuffer(self, tensor));
      Ref shape(ShapeTuple(tensor.shape()));
      if (!buffer || !shape) return nullptr;
      const auto* b = reinterpret_cast<InputBufferObject*>(buffer.get());
      PyObject* item =
          Py_BuildValue("(siOOiL)", tensor.name().c_str(), int(tensor.dtype()),
                        shape.get(), buffer.get(), b->memory_type,
                        static_cast<long long>(b->memory_type_id));
      if (item == nullptr) return nullptr;
      PyTuple_SET_ITEM(tuple.get(), i, item);
    }
    return tuple.release();
  });
}

PyObject* HandleId(PyObject* self, PyObject*) {
  return Guarded([&]() -> PyObject* {
    return PyUnicode_FromString(Live(self)->request->id().c_str());
  });
}

PyObject* HandleCorrelationId(PyObject* self, PyObject*) {
  return Guarded([&]() -> PyObject* {
    const tb::CorrelationId id = Live(self)->request->correlation_id();
    if (id.is_string) return PyUnicode_FromString(id.text.c_str());
    return PyLong_FromUnsignedLongLong(id.number);
  });
}

PyObject* HandleFlags(PyObject* self, PyObject*) {
  return Guarded([&]() -> PyObject* {
    return PyLong_FromUnsignedLong(Live(self)->request->flags());
  });
}

PyObject* HandleTimeout(PyObject* self, PyObject*) {
  return Guarded([&]() -> PyObject* {
    return PyLong_FromUnsignedLongLong(Live(self)->request->timeout_us());
  });
}

PyObject* HandleRequestedOutputs(PyObject* self, PyObject*) {
  return Guarded([&]() -> PyObject* {
    const std::vector<std::string> names = Live(self)->request->RequestedOutputs();
    Ref tuple(PyTuple_New(static_cast<Py_ssize_t>(names.size())));
    if (!tuple) return nullptr;
    for (size_t i = 0; i < names.size(); ++i) {
      PyObject* name = PyUnicode_FromString(names[i].c_str());
      if (name == nullptr) return nullptr;
      PyTuple_SET_ITEM(tuple.get(), static_cast<Py_ssize_t>(i), name);
    }
    return tuple.release();
  });
}

PyObject* HandleParameters(PyObject* self, PyObject*) {
  return Guarded([&]() -> PyObject* {
    HandleObject* h = Live(self);
    uint32_t count = 0;
    tb::Check(TRITONBACKEND_RequestParameterCount(h->raw, &count));
    Ref dict(PyDict_New());
    if (!dict) return nullptr;
    for (uint32_t i = 0; i < count; ++i) {
      const char* name = nullptr;
      TRITONSERVER_ParameterType type = TRITONSERVER_PARAMETER_STRING;
      const void* value = nullptr;
      tb::Check(TRITONBACKEND_RequestParameter(h->raw, i, &name, &type, &value));
      Ref item;
      switch (type) {
        case TRITONSERVER_PARAMETER_STRING:
          item = Ref(PyUnicode_FromString(static_cast<const char*>(value)));
          break;
        case TRITONSERVER_PARAMETER_INT:
          item = Ref(PyLong_FromLongLong(*static_cast<const int64_t*>(value)));
          break;
        case TRITONSERVER_PARAMETER_BOOL:
          item = Ref::Borrow(*static_cast<const bool*>(value) ? Py_True : Py_False);
          break;
        case TRITONSERVER_PARAMETER_DOUBLE:
          item = Ref(PyFloat_FromDouble(*static_cast<const double*>(value)));
          break;
        default:
          continue;  // BYTES parameters are not exposed
      }
      if (!item || PyDict_SetItemString(dict.get(), name, item.get()) != 0) {
        return nullptr;
      }
    }
    return dict.release();
  });
}

PyObject* HandleGetFinished(PyObject* self, void*) {
  auto* h = reinterpret_cast<HandleObject*>(self);
  return PyBool_FromLong(h->request != nullptr && h->request->finished());
}

void HandleDealloc(PyObject* self) {
  auto* h = reinterpret_cast<HandleObject*>(self);
  PyTypeObject* type = Py_TYPE(self);
  if (h->request != nullptr) {
    auto release = [h] {
      FailLocked(h, TRITONSERVER_ERROR_INTERNAL,
                 h->request->model().decoupled()
                     ? "the model dropped the request's response sender "
                       "without sending the final flag"
                     : "the model sent no response for this request");
      delete h->request;  // deletes its response factory
      tb::detail::LogIfError(
          TRITONBACKEND_RequestRelease(h->raw, TRITONSERVER_REQUEST_RELEASE_ALL),
          "releasing a request");
    };
    if (PythonAlive()) {
      NoGil unlocked;  // the release may run the requester's callbacks
      release();
    } else {
      release();
    }
    delete h->mu;
    h->request = nullptr;
  }
  type->tp_free(self);
  Py_DECREF(type);
}

PyMethodDef kHandleMethods[] = {
    {"send", HandleSend, METH_VARARGS,
     "send(outputs, parameters=None, final=True): one response"},
    {"fail", HandleFailMethod, METH_VARARGS,
     "fail(code, message): end the request with an error"},
    {"finish", HandleFinish, METH_NOARGS,
     "finish(): the final flag of a decoupled request"},
    {"is_cancelled", HandleIsCancelled, METH_NOARGS, nullptr},
    {"inputs", HandleInputs, METH_NOARGS, nullptr},
    {"id", HandleId, METH_NOARGS, nullptr},
    {"correlation_id", HandleCorrelationId, METH_NOARGS, nullptr},
    {"flags", HandleFlags, METH_NOARGS, nullptr},
    {"timeout_us", HandleTimeout, METH_NOARGS, nullptr},
    {"requested_outputs", HandleRequestedOutputs, METH_NOARGS, nullptr},
    {"parameters", HandleParameters, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef kHandleGetSet[] = {
    {"finished", HandleGetFinished, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

// ---- InputBuffer ----------------------------------------------------------------

int InputGetBuffer(PyObject* self, Py_buffer* view, int flags) {
  auto* b = reinterpret_cast<InputBufferObject*>(self);
  if (b->owner == nullptr) {
    PyErr_SetString(PyExc_BufferError, "not an input of the backend");
    view->obj = nullptr;
    return -1;
  }
  if (!tb::IsHostMemory(static_cast<TRITONSERVER_MemoryType>(b->memory_type))) {
    PyErr_SetString(PyExc_BufferError,
                    "this input is in device memory: read it through DLPack");
    view->obj = nullptr;
    return -1;
  }
  static char empty = 0;
  void* data = const_cast<void*>(b->data != nullptr ? b->data : &empty);
  return PyBuffer_FillInfo(view, self, data, b->size, /*readonly=*/1, flags);
}

void InputDealloc(PyObject* self) {
  auto* b = reinterpret_cast<InputBufferObject*>(self);
  PyTypeObject* type = Py_TYPE(self);
  delete[] b->gathered;
  Py_XDECREF(b->owner);  // may release the request
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* InputPtr(PyObject* self, void*) {
  auto* b = reinterpret_cast<InputBufferObject*>(self);
  return PyLong_FromVoidPtr(const_cast<void*>(b->data));
}

PyObject* InputSize(PyObject* self, void*) {
  return PyLong_FromSsize_t(reinterpret_cast<InputBufferObject*>(self)->size);
}

PyGetSetDef kInputGetSet[] = {
    {"ptr", InputPtr, nullptr, nullptr, nullptr},
    {"size", InputSize, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyObject* MakeType(const char* name, const char* doc, int basicsize,
                   std::vector<PyType_Slot> slots) {
  slots.push_back({Py_tp_doc, const_cast<char*>(doc)});
  slots.push_back({0, nullptr});
  // Python keeps pointers into the spec's strings and slots: keep them.
  static std::vector<std::unique_ptr<std::vector<PyType_Slot>>> keep;
  keep.push_back(std::make_unique<std::vector<PyType_Slot>>(std::move(slots)));
  auto* spec = new PyType_Spec{name, basicsize, 0, Py_TPFLAGS_DEFAULT,
                               keep.back()->data()};
  return PyType_FromSpec(spec);
}

}  // namespace

PyObject* MakeHandleType() {
  return MakeType("tritonserver._inprocess.RequestHandle",
                  "One request of a batch, as the inprocess backend hands it "
                  "to Python.",
                  sizeof(HandleObject),
                  {{Py_tp_dealloc, reinterpret_cast<void*>(HandleDealloc)},
                   {Py_tp_methods, kHandleMethods},
                   {Py_tp_getset, kHandleGetSet}});
}

PyObject* MakeInputBufferType() {
  return MakeType("tritonserver._inprocess.InputBuffer",
                  "An input tensor's data in the core's memory (read only).",
                  sizeof(InputBufferObject),
                  {{Py_tp_dealloc, reinterpret_cast<void*>(InputDealloc)},
                   {Py_bf_getbuffer, reinterpret_cast<void*>(InputGetBuffer)},
                   {Py_tp_getset, kInputGetSet}});
}

PyObject* NewHandle(TRITONBACKEND_Request* request, tb::Instance& instance,
                    uint64_t exec_start, uint64_t compute_start) {
  PyObject* obj = PyType_GenericAlloc(
      reinterpret_cast<PyTypeObject*>(TheRuntime().handle_type), 0);
  if (obj == nullptr) return nullptr;
  auto* h = reinterpret_cast<HandleObject*>(obj);
  h->raw = request;
  h->exec_start = exec_start;
  h->compute_start = compute_start;
  h->reported = false;
  try {
    h->mu = new std::mutex();
    h->request = new tb::Request(request, instance);
  } catch (const std::bad_alloc&) {
    delete h->mu;
    h->mu = nullptr;
    Py_DECREF(obj);  // request still null: the dealloc leaves the request alone
    PyErr_NoMemory();
    return nullptr;
  }
  return obj;
}

bool HandleFinished(PyObject* handle) {
  auto* h = reinterpret_cast<HandleObject*>(handle);
  return h->request == nullptr || h->request->finished();
}

bool HandleFailed(PyObject* handle) {
  auto* h = reinterpret_cast<HandleObject*>(handle);
  return h->request == nullptr || h->request->failed();
}

uint64_t HandleBatchSize(PyObject* handle) {
  auto* h = reinterpret_cast<HandleObject*>(handle);
  uint64_t size = 1;
  if (h->request != nullptr) {
    TRITONSERVER_Error* error = tb::Guard([&] { size = h->request->batch_size(); });
    tb::detail::LogIfError(error, "reading a request's batch size");
  }
  return size;
}

void HandleFail(PyObject* handle, TRITONSERVER_Error_Code code,
                const std::string& message) {
  HandleObject* h = Live(handle);
  NoGil unlocked;
  std::lock_guard<std::mutex> lock(*h->mu);
  FailLocked(h, code, message.c_str());
}

}  // namespace inprocess
