#include "bindings/response.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>

#include "bindings/errors.h"
#include "bindings/gil.h"
#include "core_api.h"

namespace py = pybind11;

namespace tritonpy {
namespace {

// A Python owner for one reference to an OutputBuffer (adopted, not added).
class OutputMemory {
 public:
  explicit OutputMemory(OutputBuffer* buffer) : buffer_(buffer) {}
  ~OutputMemory() { buffer_->Unref(); }
  OutputMemory(const OutputMemory&) = delete;
  OutputMemory& operator=(const OutputMemory&) = delete;

 private:
  OutputBuffer* buffer_;
};

using ParamValue = std::variant<std::string, int64_t, bool, double>;

bool ReadParameter(TRITONSERVER_ParameterType type, const void* value, ParamValue* out) {
  switch (type) {
    case TRITONSERVER_PARAMETER_STRING:
      *out = std::string(static_cast<const char*>(value));
      return true;
    case TRITONSERVER_PARAMETER_INT:
      *out = *static_cast<const int64_t*>(value);
      return true;
    case TRITONSERVER_PARAMETER_BOOL:
      *out = *static_cast<const bool*>(value);
      return true;
    case TRITONSERVER_PARAMETER_DOUBLE:
      *out = *static_cast<const double*>(value);
      return true;
    default:
      return false;  // BYTES parameters are not exposed
  }
}

}  // namespace

ResponseData::~ResponseData() {
  for (OutputData& o : outputs) {
    if (o.buffer != nullptr) o.buffer->Unref();
  }
}

namespace {

// Index of the largest of the first `count` values at `base` (host memory).
template <typename T>
size_t ArgMax(const void* base, size_t count) {
  const T* v = static_cast<const T*>(base);
  size_t best = 0;
  for (size_t i = 1; i < count; ++i) {
    if (v[i] > v[best]) best = i;
  }
  return best;
}

bool TopClass(const OutputData& o, size_t* index) {
  if (o.memory_type == TRITONSERVER_MEMORY_GPU || o.shape.empty()) return false;
  const size_t classes = static_cast<size_t>(std::max<int64_t>(o.shape.back(), 0));
  const void* base = reinterpret_cast<const void*>(o.data_ptr);
  if (classes == 0 || base == nullptr) return false;
  switch (o.datatype) {
    case TRITONSERVER_TYPE_FP32: *index = ArgMax<float>(base, classes); return true;
    case TRITONSERVER_TYPE_FP64: *index = ArgMax<double>(base, classes); return true;
    case TRITONSERVER_TYPE_INT32: *index = ArgMax<int32_t>(base, classes); return true;
    case TRITONSERVER_TYPE_INT64: *index = ArgMax<int64_t>(base, classes); return true;
    case TRITONSERVER_TYPE_UINT8: *index = ArgMax<uint8_t>(base, classes); return true;
    default: return false;
  }
}

}  // namespace

std::unique_ptr<ResponseData> ResponseSink::Read(TRITONSERVER_InferenceResponse* r) const {
  const CoreApi& api = Core();
  auto data = std::make_unique<ResponseData>();
  // Deleted on leaving, whatever happens: nothing below keeps it.
  struct Owner {
    TRITONSERVER_InferenceResponse* r;
    ~Owner() { ErrorPtr ignored(Core().TRITONSERVER_InferenceResponseDelete(r)); }
  } owner{r};
  const char* text = nullptr;
  Check(api.TRITONSERVER_InferenceResponseId(r, &text));
  data->request_id = text ? text : "";
  Check(api.TRITONSERVER_InferenceResponseModel(r, &text, &data->model_version));
  data->model_name = text ? text : "";
  if (TRITONSERVER_Error* err = api.TRITONSERVER_InferenceResponseError(r)) {
    data->has_error = true;  // owned by the response: not deleted here
    data->error_code = static_cast<int>(api.TRITONSERVER_ErrorCode(err));
    const char* msg = api.TRITONSERVER_ErrorMessage(err);
    data->error_message = msg ? msg : "";
  }
  uint32_t count = 0;
  Check(api.TRITONSERVER_InferenceResponseParameterCount(r, &count));
  for (uint32_t i = 0; i < count; ++i) {
    const char* name = nullptr;
    TRITONSERVER_ParameterType type;
    const void* value = nullptr;
    Check(api.TRITONSERVER_InferenceResponseParameter(r, i, &name, &type, &value));
    ParamValue v;
    if (ReadParameter(type, value, &v)) data->parameters.emplace_back(name, std::move(v));
  }
  Check(api.TRITONSERVER_InferenceResponseOutputCount(r, &count));
  data->outputs.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    OutputData& o = data->outputs[i];
    const char* name = nullptr;
    TRITONSERVER_DataType dtype;
    const int64_t* shape = nullptr;
    uint64_t dims = 0;
    const void* base = nullptr;
    TRITONSERVER_MemoryType mtype;
    void* userp = nullptr;
    Check(api.TRITONSERVER_InferenceResponseOutput(r, i, &name, &dtype, &shape, &dims, &base,
                                                   &o.byte_size, &mtype, &o.memory_type_id,
                                                   &userp));
    o.name = name;
    o.datatype = static_cast<int>(dtype);
    o.shape.assign(shape, shape + dims);
    o.data_ptr = reinterpret_cast<uintptr_t>(base);
    o.memory_type = static_cast<int>(mtype);
    if (userp != nullptr) {
      o.buffer = static_cast<OutputBuffer*>(userp);  // one of our allocators' buffers
      o.buffer->Ref();
    } else if (o.byte_size > 0) {
      // Not from our allocator: the memory dies with the response, so copy.
      if (mtype == TRITONSERVER_MEMORY_GPU) {
        throw TritonError(TRITONSERVER_ERROR_UNSUPPORTED,
                          "output '" + o.name + "' is in GPU memory the core owns");
      }
      HostBuffer* copy = HostBuffer::New(o.byte_size);
      if (copy == nullptr) throw std::bad_alloc();
      std::memcpy(copy->data(), base, o.byte_size);
      o.buffer = copy;
      o.data_ptr = reinterpret_cast<uintptr_t>(copy->data());
      o.memory_type = TRITONSERVER_MEMORY_CPU;
      o.memory_type_id = 0;
    }
  }
  size_t top = 0;
  if (classify_ && !data->has_error && !data->outputs.empty() &&
      TopClass(data->outputs[0], &top)) {
    // The first element's classes (the last dimension); labels come from
    // the model's label file, through the core.
    const char* label = nullptr;
    Check(api.TRITONSERVER_InferenceResponseOutputClassificationLabel(r, 0, top, &label));
    if (label != nullptr) data->classification_label = label;
  }
  return data;
}

void ResponseSink::SetUserAllocator(std::unique_ptr<UserAllocator> allocator) {
  user_allocator_ = std::move(allocator);
}

ResponseSink::~ResponseSink() {
  items_.clear();  // plain data: buffers are unreferenced, nothing else
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

void ResponseSink::Push(TRITONSERVER_InferenceResponse* response, uint32_t flags) noexcept {
  Item item{nullptr, flags};
  if (response != nullptr) {
    try {
      item.data = Read(response);
    } catch (const std::exception& e) {
      item.data = std::make_unique<ResponseData>();
      item.data->has_error = true;
      item.data->error_code = TRITONSERVER_ERROR_INTERNAL;
      item.data->error_message = std::string("cannot read the response: ") + e.what();
    }
  }
  Deliver(std::move(item));
}

bool ResponseSink::Abandon(TRITONSERVER_Error_Code code, const std::string& message) noexcept {
  try {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (final_seen_ || abandoned_) return false;
    }
    Item item{std::make_unique<ResponseData>(), TRITONSERVER_RESPONSE_COMPLETE_FINAL};
    item.data->has_error = true;
    item.data->error_code = code;
    item.data->error_message = message;
    Deliver(std::move(item));
    std::lock_guard<std::mutex> lock(mutex_);
    abandoned_ = true;
    return true;
  } catch (...) {
    return false;
  }
}

void ResponseSink::Deliver(Item item) noexcept {
  const uint32_t flags = item.flags;
  bool wake_python = false;
  LoopNotifier* wake_loop = nullptr;  // kept alive by loop_notifier_
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (abandoned_) return;  // the reader was told it is over: drop the rest
    items_.push_back(std::move(item));
    if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) final_seen_ = true;
    // Taking the GIL on this thread is the expensive part: only when asked,
    // and never for an event loop with a LoopNotifier.
    if (loop_notifier_ && armed_) {
      wake_loop = loop_notifier_.get();
    } else {
      wake_python = notifier_ != nullptr && (notify_always_ || armed_);
    }
    armed_ = false;
  }
  ready_.notify_all();
  if (wake_loop != nullptr) wake_loop->Notify(loop_token_);
  if (!wake_python) return;
  GilFromAnyThread gil;
  if (!gil.held() || notifier_ == nullptr) return;
  // Held across the call: the notifier may replace itself (SetNotifier).
  PyObject* notifier = notifier_;
  Py_INCREF(notifier);
  PyObject* result = PyObject_CallNoArgs(notifier);
  Py_DECREF(notifier);
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

void ResponseSink::OnComplete(TRITONSERVER_InferenceResponse* response, uint32_t flags,
                              void* userp) {
  auto* holder = static_cast<std::shared_ptr<ResponseSink>*>(userp);
  (*holder)->Push(response, flags);
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) delete holder;
}

py::object ResponseSink::ToPython(Item& item) {
  if (!item.data) return py::make_tuple(item.flags, py::none());
  ResponseData& d = *item.data;
  py::object error = py::none();
  if (d.has_error) error = py::make_tuple(d.error_code, py::str(d.error_message));
  py::dict parameters;
  for (const auto& [name, value] : d.parameters) {
    parameters[py::str(name)] = std::visit([](const auto& v) { return py::cast(v); }, value);
  }
  py::list outputs;
  for (OutputData& o : d.outputs) {
    py::object owner = py::none();
    if (o.buffer != nullptr) {
      owner = py::cast(std::make_shared<OutputMemory>(o.buffer));
      o.buffer = nullptr;  // the reference now belongs to `owner`
    }
    py::tuple shape(o.shape.size());
    for (size_t i = 0; i < o.shape.size(); ++i) shape[i] = py::int_(o.shape[i]);
    outputs.append(py::make_tuple(py::str(o.name), o.datatype, shape, o.data_ptr, o.byte_size,
                                  o.memory_type, o.memory_type_id, owner));
  }
  py::object label = py::none();
  if (!d.classification_label.empty()) label = py::str(d.classification_label);
  py::tuple payload = py::make_tuple(error, py::str(d.request_id), py::str(d.model_name),
                                     d.model_version, parameters, outputs, label);
  return py::make_tuple(item.flags, payload);
}

py::object ResponseSink::TryGet() {
  Item item{nullptr, 0};
  PyObject* error = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::swap(error, notifier_error_);
    if (error == nullptr) {
      if (items_.empty()) return py::none();
      item = std::move(items_.front());
      items_.pop_front();
    }
  }
  if (error != nullptr) {
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error)), error);
    Py_DECREF(error);
    throw py::error_already_set();
  }
  return ToPython(item);
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

void ResponseSink::SetNotifier(py::object notifier, bool always) {
  PyObject* old = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    old = notifier_;
    notifier_ = notifier.is_none() ? nullptr : notifier.release().ptr();
    notify_always_ = always;
    armed_ = false;
  }
  Py_XDECREF(old);
}

void ResponseSink::SetLoopNotifier(std::shared_ptr<LoopNotifier> notifier, uint64_t token) {
  std::lock_guard<std::mutex> lock(mutex_);
  loop_notifier_ = std::move(notifier);
  loop_token_ = token;
  armed_ = false;
}

bool ResponseSink::Arm() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!items_.empty() || notifier_error_ != nullptr) return false;
  armed_ = true;
  return true;
}

void RegisterResponse(py::module_& m) {
  py::class_<OutputMemory, std::shared_ptr<OutputMemory>>(m, "OutputMemory",
                                                          "Keeps one output buffer alive.");
  py::class_<ResponseSink, std::shared_ptr<ResponseSink>>(m, "ResponseSink")
      .def(py::init<>())
      .def("get", &ResponseSink::Get, py::arg("timeout") = -1.0,
           "Wait for the next (flags, payload); None on timeout.")
      .def("try_get", &ResponseSink::TryGet)
      .def("set_notifier", &ResponseSink::SetNotifier, py::arg("notifier"),
           py::arg("always") = true)
      .def("arm", &ResponseSink::Arm)
      .def("set_loop_notifier", &ResponseSink::SetLoopNotifier)
      .def("set_classify", &ResponseSink::SetClassify);
}

}  // namespace tritonpy
