#include "bindings/trace.h"

#include <pybind11/stl.h>

#include <cstring>
#include <random>
#include <sstream>

#include "bindings/errors.h"
#include "core_api.h"

namespace py = pybind11;

namespace tritonpy {
namespace {

// `text` as the inside of a JSON string.
void AppendEscaped(std::string& out, const char* text, size_t size) {
  static const char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < size; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
}

void AppendEscaped(std::string& out, const char* text) {
  if (text != nullptr) AppendEscaped(out, text, std::strlen(text));
}

// The name a backend gave a custom activity: the trace context is a JSON
// object of {"<timestamp_ns>": "<name>"} (TRITONSERVER_InferenceTraceReportActivity).
std::string CustomActivityName(TRITONSERVER_InferenceTrace* trace, uint64_t timestamp_ns) {
  const char* context = nullptr;
  ErrorPtr err(Core().TRITONSERVER_InferenceTraceContext(trace, &context));
  std::string name = "CUSTOM_ACTIVITY";
  if (err.get() != nullptr || context == nullptr) return name;
  const std::string text(context);
  const std::string key = "\"" + std::to_string(timestamp_ns) + "\":\"";
  const size_t at = text.find(key);
  if (at == std::string::npos) return name;
  std::string found;
  for (size_t i = at + key.size(); i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size()) {
      found += text[++i];
    } else if (text[i] == '"') {
      return found;
    } else {
      found += text[i];
    }
  }
  return name;
}

// Writes `count` elements of type T from `base` as Triton's trace does
// (comma-separated, the stream's default number format).
template <typename T, typename Shown = T>
void AppendNumbers(std::ostringstream& out, const void* base, size_t count) {
  const T* values = static_cast<const T*>(base);
  for (size_t e = 0; e < count; ++e) {
    if (e > 0) out << ",";
    T value;
    std::memcpy(&value, values + e, sizeof(T));  // the buffer may be unaligned
    out << static_cast<Shown>(value);
  }
}

// The "data" string of a tensor record; empty for the types Triton leaves
// out (FP16, BF16) and on a buffer shorter than its shape says.
std::string TensorData(TRITONSERVER_DataType datatype, const void* base, size_t byte_size,
                       size_t element_count) {
  std::ostringstream out;
  auto fits = [&](size_t element_size) {
    return element_size != 0 && element_count <= byte_size / element_size;
  };
  switch (datatype) {
    case TRITONSERVER_TYPE_BOOL:
      if (fits(1)) AppendNumbers<uint8_t, int>(out, base, element_count);
      break;
    case TRITONSERVER_TYPE_UINT8:
      if (fits(1)) AppendNumbers<uint8_t, unsigned>(out, base, element_count);
      break;
    case TRITONSERVER_TYPE_INT8:
      if (fits(1)) AppendNumbers<int8_t, int>(out, base, element_count);
      break;
    case TRITONSERVER_TYPE_UINT16:
      if (fits(2)) AppendNumbers<uint16_t>(out, base, element_count);
      break;
    case TRITONSERVER_TYPE_INT16:
      if (fits(2)) AppendNumbers<int16_t>(out, base, element_count);
      break;
    case TRITONSERVER_TYPE_UINT32:
      if (fits(4)) AppendNumbers<uint32_t>(out, base, element_count);
      break;
    case TRITONSERVER_TYPE_INT32:
      if (fits(4)) AppendNumbers<int32_t>(out, base, element_count);
      break;
    case TRITONSERVER_TYPE_UINT64:
      if (fits(8)) AppendNumbers<uint64_t>(out, base, element_count);
      break;
    case TRITONSERVER_TYPE_INT64:
      if (fits(8)) AppendNumbers<int64_t>(out, base, element_count);
      break;
    case TRITONSERVER_TYPE_FP32:
      if (fits(4)) AppendNumbers<float>(out, base, element_count);
      break;
    case TRITONSERVER_TYPE_FP64:
      if (fits(8)) AppendNumbers<double>(out, base, element_count);
      break;
    case TRITONSERVER_TYPE_BYTES: {
      // Each element: a 4-byte length, then its bytes; shown quoted.
      const char* bytes = static_cast<const char*>(base);
      size_t offset = 0;
      std::string text;
      for (size_t e = 0; e < element_count; ++e) {
        uint32_t length = 0;
        if (offset + sizeof(length) > byte_size) break;
        std::memcpy(&length, bytes + offset, sizeof(length));
        offset += sizeof(length);
        if (offset + length > byte_size) break;
        if (e > 0) text += ",";
        text += "\"";
        text.append(bytes + offset, length);
        text += "\"";
        offset += length;
      }
      return text;
    }
    default:  // FP16, BF16, INVALID
      break;
  }
  return out.str();
}

// A new OpenTelemetry span id: 16 lowercase hex digits, never all zero.
std::string NewSpanId() {
  static const char kHex[] = "0123456789abcdef";
  thread_local std::mt19937_64 generator{std::random_device{}()};
  uint64_t value = 0;
  while (value == 0) value = generator();
  std::string id(16, '0');
  for (int i = 15; i >= 0; --i, value >>= 4) id[i] = kHex[value & 0xf];
  return id;
}

}  // namespace

std::string TraceSink::OtelContext(const std::string& span_id) const {
  std::string context = "{\"traceparent\":\"00-" + otel_trace_id_ + "-" + span_id + "-";
  AppendEscaped(context, otel_flags_.data(), otel_flags_.size());
  context += "\"";
  if (!otel_state_.empty()) {
    context += ",\"tracestate\":\"";
    AppendEscaped(context, otel_state_.data(), otel_state_.size());
    context += "\"";
  }
  return context + "}";
}

void TraceSink::Deliver(const std::string& records) noexcept {
  pyinterop::AcquireGil gil;
  if (!gil.held()) return;  // the interpreter is shutting down
  PyObject* text =
      PyUnicode_DecodeUTF8(records.data(), static_cast<Py_ssize_t>(records.size()), "replace");
  if (text != nullptr) {
    PyObject* result = PyObject_CallOneArg(callable_.get(), text);
    Py_DECREF(text);
    if (result != nullptr) {
      Py_DECREF(result);
      return;
    }
  }
  PyErr_WriteUnraisable(callable_.get());
}

std::shared_ptr<TraceRecorder> TraceRecorder::Start(uint32_t level, std::shared_ptr<TraceSink> sink,
                                                    TRITONSERVER_InferenceTrace** trace) {
  const CoreApi& api = Core();
  // What the callbacks call, checked here: they cannot raise.
  Need(api.TRITONSERVER_InferenceTraceId, "TRITONSERVER_InferenceTraceId");
  Need(api.TRITONSERVER_InferenceTraceDelete, "TRITONSERVER_InferenceTraceDelete");
  Need(api.TRITONSERVER_InferenceTraceModelName, "TRITONSERVER_InferenceTraceModelName");
  Need(api.TRITONSERVER_InferenceTraceModelVersion, "TRITONSERVER_InferenceTraceModelVersion");
  Need(api.TRITONSERVER_InferenceTraceParentId, "TRITONSERVER_InferenceTraceParentId");
  Need(api.TRITONSERVER_InferenceTraceRequestId, "TRITONSERVER_InferenceTraceRequestId");
  Need(api.TRITONSERVER_InferenceTraceContext, "TRITONSERVER_InferenceTraceContext");
  Need(api.TRITONSERVER_InferenceTraceActivityString, "TRITONSERVER_InferenceTraceActivityString");
  if (sink == nullptr) throw Error(TRITONSERVER_ERROR_INVALID_ARG, "a trace needs a TraceSink");
  if (sink->opentelemetry()) {
    Need(api.TRITONSERVER_InferenceTraceSetContext, "TRITONSERVER_InferenceTraceSetContext");
  }

  auto recorder = std::make_shared<TraceRecorder>(level, std::move(sink));
  auto holder = std::make_unique<std::shared_ptr<TraceRecorder>>(recorder);
  TRITONSERVER_InferenceTrace* created = nullptr;
  Check(TRITON_FN(TRITONSERVER_InferenceTraceTensorNew)(
      &created, static_cast<TRITONSERVER_InferenceTraceLevel>(level), 0 /* no parent */,
      &TraceRecorder::OnActivity, &TraceRecorder::OnTensor, &TraceRecorder::OnRelease,
      holder.get()));
  recorder->root_ = created;
  ErrorPtr ignored(api.TRITONSERVER_InferenceTraceId(created, &recorder->root_id_));
  recorder->holder_ = holder.release();  // freed when the trace is finished
  *trace = created;
  return recorder;
}

TraceRecorder::~TraceRecorder() {
  try {
    std::string records;
    for (const auto& [stream_id, stream] : streams_) {
      if (!records.empty()) records += ",";
      records += stream;
    }
    sink_->Deliver(records);
  } catch (...) {
    // Out of memory joining the records: the trace is lost, not the process.
  }
}

void TraceRecorder::Capture(const std::string& name, uint64_t timestamp_ns) {
  if (!(level_ & TRITONSERVER_TRACE_LEVEL_TIMESTAMPS)) return;
  std::string record = "{\"id\":" + std::to_string(root_id_) + ",\"timestamps\":[{\"name\":\"";
  AppendEscaped(record, name.data(), name.size());
  record += "\",\"ns\":" + std::to_string(timestamp_ns) + "}]";
  record += otel_ ? ",\"frontend\":true}" : "}";
  Append(root_id_, record, false);
}

void TraceRecorder::Append(uint64_t id, const std::string& record, bool open) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open) open_.insert(id);
  const uint64_t key = otel_ ? 0 : id;
  for (auto& [stream_id, stream] : streams_) {
    if (stream_id == key) {
      stream += ",";
      stream += record;
      return;
    }
  }
  streams_.emplace_back(key, record);
}

void TraceRecorder::OnActivity(TRITONSERVER_InferenceTrace* trace,
                               TRITONSERVER_InferenceTraceActivity activity, uint64_t timestamp_ns,
                               void* userp) noexcept {
  try {
    TraceRecorder& self = **static_cast<std::shared_ptr<TraceRecorder>*>(userp);
    const CoreApi& api = Core();
    uint64_t id = 0;
    ErrorPtr id_err(api.TRITONSERVER_InferenceTraceId(trace, &id));
    std::string record;
    if (activity == TRITONSERVER_TRACE_REQUEST_START) {
      // The trace's identity, once, before its first timestamp.
      const char* model_name = nullptr;
      int64_t model_version = -1;
      uint64_t parent_id = 0;
      const char* request_id = nullptr;
      ErrorPtr e1(api.TRITONSERVER_InferenceTraceModelName(trace, &model_name));
      ErrorPtr e2(api.TRITONSERVER_InferenceTraceModelVersion(trace, &model_version));
      ErrorPtr e3(api.TRITONSERVER_InferenceTraceParentId(trace, &parent_id));
      ErrorPtr e4(api.TRITONSERVER_InferenceTraceRequestId(trace, &request_id));
      record += "{\"id\":" + std::to_string(id) + ",\"model_name\":\"";
      AppendEscaped(record, model_name);
      record += "\",\"model_version\":" + std::to_string(model_version);
      if (request_id != nullptr && request_id[0] != '\0') {
        record += ",\"request_id\":\"";
        AppendEscaped(record, request_id);
        record += "\"";
      }
      if (parent_id != 0) record += ",\"parent_id\":" + std::to_string(parent_id);
      if (self.otel_) {
        // The request's span, known to its model from now on (Triton's
        // tracer sets the context at this very activity).
        const std::string span_id = NewSpanId();
        record += ",\"span_id\":\"" + span_id + "\"";
        ErrorPtr e5(api.TRITONSERVER_InferenceTraceSetContext(
            trace, self.sink_->OtelContext(span_id).c_str()));
      }
      record += "},";
    }
    std::string name = activity == TRITONSERVER_TRACE_CUSTOM_ACTIVITY
                           ? CustomActivityName(trace, timestamp_ns)
                           : std::string(api.TRITONSERVER_InferenceTraceActivityString(activity));
    record += "{\"id\":" + std::to_string(id) + ",\"timestamps\":[{\"name\":\"";
    AppendEscaped(record, name.data(), name.size());
    record += "\",\"ns\":" + std::to_string(timestamp_ns) + "}]}";
    self.Append(id, record, true);
  } catch (...) {
    // Called from C: nothing may unwind; the record is lost.
  }
}

void TraceRecorder::OnTensor(TRITONSERVER_InferenceTrace* trace,
                             TRITONSERVER_InferenceTraceActivity activity, const char* name,
                             TRITONSERVER_DataType datatype, const void* base, size_t byte_size,
                             const int64_t* shape, uint64_t dim_count,
                             TRITONSERVER_MemoryType memory_type, int64_t, void* userp) noexcept {
  if (activity != TRITONSERVER_TRACE_TENSOR_QUEUE_INPUT &&
      activity != TRITONSERVER_TRACE_TENSOR_BACKEND_INPUT &&
      activity != TRITONSERVER_TRACE_TENSOR_BACKEND_OUTPUT) {
    return;
  }
  // Only host memory can be read here (the binding has no CUDA runtime).
  if (memory_type == TRITONSERVER_MEMORY_GPU || datatype == TRITONSERVER_TYPE_INVALID) return;
  try {
    TraceRecorder& self = **static_cast<std::shared_ptr<TraceRecorder>*>(userp);
    if (self.otel_) return;  // spans have no tensors (Triton's tracer leaves them out too)
    const CoreApi& api = Core();
    uint64_t id = 0;
    ErrorPtr id_err(api.TRITONSERVER_InferenceTraceId(trace, &id));
    size_t element_count = 1;
    std::string shape_text;
    for (uint64_t i = 0; i < dim_count; ++i) {
      element_count *= static_cast<size_t>(shape[i] < 0 ? 0 : shape[i]);
      if (i > 0) shape_text += ",";
      shape_text += std::to_string(shape[i]);
    }
    std::string record = "{\"id\":" + std::to_string(id) + ",\"activity\":\"" +
                         api.TRITONSERVER_InferenceTraceActivityString(activity) +
                         "\",\"tensor\":{\"name\":\"";
    AppendEscaped(record, name);
    record += "\",\"data\":\"";
    const std::string data =
        base == nullptr ? std::string() : TensorData(datatype, base, byte_size, element_count);
    AppendEscaped(record, data.data(), data.size());
    record += "\",\"shape\":\"" + shape_text + "\",\"dtype\":\"";
    AppendEscaped(record, Core().TRITONSERVER_DataTypeString(datatype));
    record += "\"}}";
    self.Append(id, record, true);
  } catch (...) {
    // Called from C: nothing may unwind; the record is lost.
  }
}

void TraceRecorder::OnRelease(TRITONSERVER_InferenceTrace* trace, void* userp) noexcept {
  auto* holder = static_cast<std::shared_ptr<TraceRecorder>*>(userp);
  std::shared_ptr<TraceRecorder> self = *holder;  // alive to the end of this call
  bool finished = false;
  const CoreApi* api = nullptr;
  try {
    api = &Core();
    uint64_t id = 0;
    ErrorPtr id_err(api->TRITONSERVER_InferenceTraceId(trace, &id));
    std::lock_guard<std::mutex> lock(self->mutex_);
    self->open_.erase(id);
    if (trace == self->root_) self->root_released_ = true;
    if (self->root_released_ && self->open_.empty() && !self->finished_) {
      self->finished_ = true;
      finished = true;
    }
  } catch (...) {
    // Called from C: nothing may unwind. The trace is still deleted below.
  }
  // This callback owns `trace` (the core's contract).
  if (api != nullptr) ErrorPtr ignored(api->TRITONSERVER_InferenceTraceDelete(trace));
  // The core's reference goes; the records go to the sink with the last one
  // (this one, or the request's).
  if (finished) delete holder;
}

void TraceRecorder::Abandon() noexcept {
  bool release = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    release = !root_released_;
  }
  // Refused before the core took the trace: it is still ours to release.
  if (release) OnRelease(root_, holder_);
}

void RegisterTrace(py::module_& m) {
  py::class_<TraceSink, std::shared_ptr<TraceSink>>(
      m, "TraceSink",
      "Where finished traces go: `callable(records: str)` gets each traced request's JSON "
      "records (comma-separated objects, as in Triton's trace file), with the GIL, on the "
      "thread that releases the trace. With `otel_trace_id` (32 lowercase hex digits) an "
      "OpenTelemetry trace: each request's first record has its \"span_id\", set as the core "
      "trace's context (traceparent with `otel_flags`, tracestate `otel_state`); the records "
      "are in the order the core reported them, without tensors, a frontend's timestamps "
      "marked \"frontend\".")
      .def(py::init<py::object, std::string, std::string, std::string>(), py::arg("callable"),
           py::arg("otel_trace_id") = "", py::arg("otel_flags") = "01", py::arg("otel_state") = "");
}

}  // namespace tritonpy
