// Core traces (TRITONSERVER_InferenceTrace) of sampled requests. Python
// decides which requests are traced and at which level (tritonserver._trace);
// this records what the core reports for them, in C++ on the core's threads
// without the GIL, in the JSON records of Triton's trace file. The records
// go to Python in one call once the core released the request's trace and
// every child trace spawned from it (ensembles, BLS) and the request itself
// is gone, so a frontend can add its own timestamps (HTTP_SEND_END...) until
// it lets go of the request, as Triton's frontends do.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "pyinterop/ref.h"
#include "triton/tritonserver.h"

namespace tritonpy {

// Where finished traces go: a Python callable taking one str (the trace's
// records, comma-separated JSON objects), called with the GIL on whatever
// thread releases the trace. One per sampled request.
//
// With an OpenTelemetry trace id (32 lowercase hex digits) the trace is an
// OpenTelemetry one (tritonserver._otel builds its spans): every request of
// it (the request's and each child's, at REQUEST_START) gets a span id,
// written in its first record ("span_id") and set as the core trace's
// context ({"traceparent": "00-<trace id>-<span id>-<flags>", "tracestate"}),
// which the python backend gives its models (request.trace().get_context()),
// as Triton's tracer does; the records are one stream in the order the core
// reported them (Triton's spans nest by that order), tensors are left out
// and a frontend's timestamps are marked "frontend".
class TraceSink {
 public:
  explicit TraceSink(pybind11::object callable, std::string otel_trace_id = "",
                     std::string otel_flags = "01", std::string otel_state = "")
      : callable_(std::move(callable)),
        otel_trace_id_(std::move(otel_trace_id)),
        otel_flags_(std::move(otel_flags)),
        otel_state_(std::move(otel_state)) {}
  // Never throws: an exception raised by the callable is reported as
  // unraisable (there is no caller to raise it to).
  void Deliver(const std::string& records) noexcept;

  bool opentelemetry() const { return !otel_trace_id_.empty(); }
  // The core trace's context for a request whose span is `span_id`.
  std::string OtelContext(const std::string& span_id) const;

 private:
  pyinterop::OwnedRef callable_;
  const std::string otel_trace_id_;
  const std::string otel_flags_;
  const std::string otel_state_;
};

// The records of one sampled request's trace and of its children.
class TraceRecorder {
 public:
  // Creates the core trace (owned by `recorder` until the core takes it
  // with the request). Throws Error when the core refuses.
  static std::shared_ptr<TraceRecorder> Start(uint32_t level, std::shared_ptr<TraceSink> sink,
                                              TRITONSERVER_InferenceTrace** trace);
  TraceRecorder(uint32_t level, std::shared_ptr<TraceSink> sink)
      : level_(level), otel_(sink->opentelemetry()), sink_(std::move(sink)) {}
  // Hands the records to the sink.
  ~TraceRecorder();
  TraceRecorder(const TraceRecorder&) = delete;
  TraceRecorder& operator=(const TraceRecorder&) = delete;

  // A timestamp taken outside the core (a frontend's), recorded under the
  // request's trace id when the level has TIMESTAMPS.
  void Capture(const std::string& name, uint64_t timestamp_ns);

  // After TRITONSERVER_ServerInferAsync refused the request: the core may
  // or may not have released the trace already; finishes it if not.
  void Abandon() noexcept;

 private:
  static void OnActivity(TRITONSERVER_InferenceTrace* trace,
                         TRITONSERVER_InferenceTraceActivity activity, uint64_t timestamp_ns,
                         void* userp) noexcept;
  static void OnTensor(TRITONSERVER_InferenceTrace* trace,
                       TRITONSERVER_InferenceTraceActivity activity, const char* name,
                       TRITONSERVER_DataType datatype, const void* base, size_t byte_size,
                       const int64_t* shape, uint64_t dim_count,
                       TRITONSERVER_MemoryType memory_type, int64_t memory_type_id,
                       void* userp) noexcept;
  static void OnRelease(TRITONSERVER_InferenceTrace* trace, void* userp) noexcept;

  // Appends one record to trace `id`'s stream; `open`: the core reported
  // it (the trace is not finished before the core releases it).
  void Append(uint64_t id, const std::string& record, bool open);

  const uint32_t level_;
  const bool otel_;  // an OpenTelemetry trace (see TraceSink)
  const std::shared_ptr<TraceSink> sink_;
  TRITONSERVER_InferenceTrace* root_ = nullptr;
  uint64_t root_id_ = 0;
  // The core's reference to this recorder (the callbacks' userp), freed
  // when the trace is finished.
  std::shared_ptr<TraceRecorder>* holder_ = nullptr;

  std::mutex mutex_;
  // Per trace id, first seen first (an OpenTelemetry trace: one, id 0).
  std::vector<std::pair<uint64_t, std::string>> streams_;
  std::set<uint64_t> open_;  // traces reported, not released
  bool root_released_ = false;
  bool finished_ = false;
};

void RegisterTrace(pybind11::module_& m);

}  // namespace tritonpy
