#include "bindings/response.h"

#include <pybind11/stl.h>

#include <chrono>
#include <string>

#include "bindings/errors.h"
#include "bindings/gil.h"
#include "core_api.h"

namespace py = pybind11;

namespace tritonpy {

Response::~Response() {
  // Frees the output buffers through the allocator's release_fn; the default
  // allocator needs no GIL.
  if (response_ != nullptr) {
    ErrorPtr ignored(Core().TRITONSERVER_InferenceResponseDelete(response_));
  }
}

ResponseSink::~ResponseSink() {
  for (const Item& item : items_) {
    if (item.response != nullptr) {
      ErrorPtr ignored(Core().TRITONSERVER_InferenceResponseDelete(item.response));
    }
  }
  if (notifier_ != nullptr || notifier_error_ != nullptr) {
    // The last owner may be a core thread (the final response arrived after
    // Python let go): Python references die with the GIL held.
    GilFromAnyThread gil;
    if (gil.held()) {
      Py_XDECREF(notifier_);
      Py_XDECREF(notifier_error_);
    }
  }
}

void ResponseSink::Push(TRITONSERVER_InferenceResponse* response,
                        uint32_t flags) noexcept {
  bool wake_python = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.push_back(Item{response, flags});
    if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) final_seen_ = true;
    wake_python = notifier_ != nullptr;
  }
  ready_.notify_all();
  if (!wake_python) return;
  GilFromAnyThread gil;
  if (!gil.held() || notifier_ == nullptr) return;
  PyObject* result = PyObject_CallNoArgs(notifier_);
  if (result != nullptr) {
    Py_DECREF(result);
    return;
  }
  // Keep the exception for the consumer instead of losing it on this thread.
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  if (trace != nullptr && value != nullptr) PyException_SetTraceback(value, trace);
  Py_XDECREF(type);
  Py_XDECREF(trace);
  std::lock_guard<std::mutex> lock(mutex_);
  if (notifier_error_ == nullptr) {
    notifier_error_ = value;
  } else {
    Py_XDECREF(value);
  }
}

void ResponseSink::OnComplete(TRITONSERVER_InferenceResponse* response,
                              uint32_t flags, void* userp) {
  auto* holder = static_cast<std::shared_ptr<ResponseSink>*>(userp);
  (*holder)->Push(response, flags);
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) delete holder;
}

py::object ResponseSink::Wrap(const Item& item) {
  py::object response = py::none();
  if (item.response != nullptr) {
    response = py::cast(std::make_shared<Response>(server_, item.response));
  }
  return py::make_tuple(response, item.flags);
}

py::object ResponseSink::TryGet() {
  Item item{};
  PyObject* error = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::swap(error, notifier_error_);
    if (error == nullptr) {
      if (items_.empty()) return py::none();
      item = items_.front();
      items_.pop_front();
    }
  }
  if (error != nullptr) {
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error)), error);
    Py_DECREF(error);
    throw py::error_already_set();
  }
  return Wrap(item);
}

py::object ResponseSink::Get(double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const bool forever = timeout_s < 0;
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(forever ? 0 : timeout_s));
  // Wait in short slices so Ctrl-C (a pending signal) can interrupt.
  const auto slice = std::chrono::milliseconds(100);
  while (true) {
    bool have = false;
    {
      py::gil_scoped_release unlocked;  // the core's threads push meanwhile
      std::unique_lock<std::mutex> lock(mutex_);
      auto until = forever ? Clock::now() + slice : std::min(deadline, Clock::now() + slice);
      have = ready_.wait_until(lock, until, [this] {
        return !items_.empty() || notifier_error_ != nullptr;
      });
    }
    if (have) {
      py::object item = TryGet();  // another consumer may have won the race
      if (!item.is_none()) return item;
    }
    if (!forever && Clock::now() >= deadline) return py::none();
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

void ResponseSink::SetNotifier(py::object notifier) {
  PyObject* old = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    old = notifier_;
    notifier_ = notifier.is_none() ? nullptr : notifier.release().ptr();
  }
  Py_XDECREF(old);
}

bool ResponseSink::Finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  return final_seen_ && items_.empty();
}

namespace {

py::object ParameterValue(TRITONSERVER_ParameterType type, const void* value) {
  switch (type) {
    case TRITONSERVER_PARAMETER_STRING:
      return py::str(static_cast<const char*>(value));
    case TRITONSERVER_PARAMETER_INT:
      return py::int_(*static_cast<const int64_t*>(value));
    case TRITONSERVER_PARAMETER_BOOL:
      return py::bool_(*static_cast<const bool*>(value));
    case TRITONSERVER_PARAMETER_DOUBLE:
      return py::float_(*static_cast<const double*>(value));
    default:
      return py::none();
  }
}

py::object ResponseError(const Response& r) {
  TRITONSERVER_Error* err = TRITON_FN(TRITONSERVER_InferenceResponseError)(r.get());
  if (err == nullptr) return py::none();  // owned by the response: not deleted
  const CoreApi& api = Core();
  const char* msg = api.TRITONSERVER_ErrorMessage(err);
  return py::make_tuple(static_cast<int>(api.TRITONSERVER_ErrorCode(err)),
                        py::str(msg ? msg : ""));
}

py::list ResponseOutputs(const Response& r) {
  const CoreApi& api = Core();
  uint32_t count = 0;
  Check(TRITON_FN(TRITONSERVER_InferenceResponseOutputCount)(r.get(), &count));
  py::list out;
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    TRITONSERVER_DataType dtype;
    const int64_t* shape = nullptr;
    uint64_t dims = 0;
    const void* base = nullptr;
    size_t size = 0;
    TRITONSERVER_MemoryType mtype;
    int64_t mtype_id = 0;
    void* userp = nullptr;
    Check(api.TRITONSERVER_InferenceResponseOutput(r.get(), i, &name, &dtype, &shape, &dims,
                                                   &base, &size, &mtype, &mtype_id, &userp));
    py::tuple py_shape(dims);
    for (uint64_t d = 0; d < dims; ++d) py_shape[d] = py::int_(shape[d]);
    out.append(py::make_tuple(py::str(name), static_cast<int>(dtype), py_shape,
                              reinterpret_cast<uintptr_t>(base), size,
                              static_cast<int>(mtype), mtype_id));
  }
  return out;
}

}  // namespace

void RegisterResponse(py::module_& m) {
  py::class_<Response, std::shared_ptr<Response>>(m, "Response")
      .def("error", &ResponseError,
           "(code, message) when the response carries an error, else None.")
      .def("model", [](const Response& r) {
        const char* name = nullptr;
        int64_t version = -1;
        Check(TRITON_FN(TRITONSERVER_InferenceResponseModel)(r.get(), &name, &version));
        return py::make_tuple(py::str(name ? name : ""), version);
      })
      .def("id", [](const Response& r) {
        const char* id = nullptr;
        Check(TRITON_FN(TRITONSERVER_InferenceResponseId)(r.get(), &id));
        return std::string(id ? id : "");
      })
      .def("parameters", [](const Response& r) {
        const CoreApi& api = Core();
        uint32_t count = 0;
        Check(TRITON_FN(TRITONSERVER_InferenceResponseParameterCount)(r.get(), &count));
        py::dict out;
        for (uint32_t i = 0; i < count; ++i) {
          const char* name = nullptr;
          TRITONSERVER_ParameterType type;
          const void* value = nullptr;
          Check(api.TRITONSERVER_InferenceResponseParameter(r.get(), i, &name, &type, &value));
          out[py::str(name)] = ParameterValue(type, value);
        }
        return out;
      })
      .def("outputs", &ResponseOutputs,
           "[(name, datatype, shape, data_ptr, byte_size, memory_type, memory_type_id)]")
      .def("classification_label", [](const Response& r, uint32_t index, size_t class_index) {
        const char* label = nullptr;
        Check(TRITON_FN(TRITONSERVER_InferenceResponseOutputClassificationLabel)(
            r.get(), index, class_index, &label));
        return label ? py::object(py::str(label)) : py::object(py::none());
      });

  py::class_<ResponseSink, std::shared_ptr<ResponseSink>>(m, "ResponseSink")
      .def("get", &ResponseSink::Get, py::arg("timeout") = -1.0,
           "Wait for the next (response, flags); None on timeout.")
      .def("try_get", &ResponseSink::TryGet)
      .def("set_notifier", &ResponseSink::SetNotifier)
      .def("finished", &ResponseSink::Finished);
}

}  // namespace tritonpy
