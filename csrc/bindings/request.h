// An inference request. Python records what to send (settings, inputs by
// reference, parameters); Send() creates the core's request, fills it and
// hands it to the core in one call, deleting it again if any step fails.
// The core owns the request until its release callback, which deletes it,
// or hands it to the server's pool when it carried inputs only
// (request_pool.h), to be sent again by a later request of the same model.
// So a core request (which keeps its model loaded) is held only by the core
// or by that pool, which is emptied around every model load and unload: no
// Python object, traceback or garbage cycle can hold one. Input data is
// read in place: the Python objects that own it stay referenced as long as
// the request (at least until the core releases it). Responses arrive in
// the request's queue.
//
// Python holds one object per request (InferenceRequest in Python): the
// request, its queue, and the rule that a sent request nobody can read any
// more (its object is gone before the final response) is cancelled.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "bindings/request_pool.h"
#include "bindings/response_queue.h"
#include "bindings/server.h"
#include "bindings/trace.h"
#include "pyinterop/parameters.h"
#include "pyinterop/ref.h"
#include "triton/tritonserver.h"

namespace tritonpy {

class Request : public std::enable_shared_from_this<Request> {
 public:
  struct Input {
    std::string name;
    int datatype;
    std::vector<int64_t> shape;
    uintptr_t data_ptr;
    size_t byte_size;
    int memory_type;
    int64_t memory_type_id;
  };

  Request(const Server& server, std::string model, int64_t version);
  const std::shared_ptr<ResponseQueue>& queue() const { return queue_; }
  ~Request();
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // Recording, before Send(). `owner` keeps the input's memory alive until
  // the core releases the request.
  void SetId(std::string id) {
    Unsent();
    id_ = std::move(id);
  }
  void SetFlags(uint32_t flags) {
    Unsent();
    flags_ = flags;
  }
  void SetCorrelationId(std::variant<uint64_t, std::string> id) {
    Unsent();
    correlation_id_ = std::move(id);
  }
  void SetPriority(uint64_t priority) {
    Unsent();
    priority_ = priority;
  }
  void SetTimeout(uint64_t timeout_us) {
    Unsent();
    timeout_us_ = timeout_us;
  }
  // Request parameters (a dict of str to bool, int, float or str).
  void SetParameters(const pyinterop::PyParameters& parameters);
  void AddRequestedOutput(std::string name) {
    Unsent();
    outputs_.push_back(std::move(name));
  }
  // Outputs from a Python MemoryAllocator instead of the default; a
  // `preferred_type` >= 0 replaces the memory type the core asks for.
  void SetAllocator(pybind11::object allocator, int preferred_type, int64_t preferred_id);
  void AddInput(Input input, pybind11::object owner);
  // Sends the request with a core trace at `level` (TRITONSERVER_InferenceTraceLevel
  // flags) whose finished records go to `sink`.
  void SetTrace(uint32_t level, std::shared_ptr<TraceSink> sink) {
    Unsent();
    trace_level_ = level;
    trace_sink_ = std::move(sink);
  }
  // Records a timestamp taken outside the core in the request's trace;
  // false when the request was not sent with one.
  bool CaptureTimestamp(const std::string& name, uint64_t timestamp_ns);

  // Creates the core request and hands it to the core.
  void Send();
  // Asks the core to cancel the request, if it holds it.
  void Cancel();
  bool sent() const;

 private:
  void Unsent() const;
  // Only inputs and requested outputs set: its core request may be one kept
  // for reuse (request_pool.h).
  bool Plain() const;
  void Fill(TRITONSERVER_InferenceRequest* r) const;
  // Gives a kept core request this request's inputs and requested outputs
  // in place of its own.
  void Refill(PooledRequest& core) const;
  // What Fill gave the core request.
  RequestShape Shape() const;
  static void OnRelease(TRITONSERVER_InferenceRequest* request, uint32_t flags, void* userp);

  std::weak_ptr<ServerHandle> server_;                     // the request never keeps it alive
  std::shared_ptr<std::atomic<int64_t>> in_flight_count_;  // the server's, while counted
  std::string model_;
  int64_t version_;
  std::optional<std::string> id_;
  uint32_t flags_ = 0;
  std::optional<std::variant<uint64_t, std::string>> correlation_id_;
  uint64_t priority_ = 0;
  uint64_t timeout_us_ = 0;
  pyinterop::Parameters parameters_;
  std::vector<std::string> outputs_;
  std::vector<Input> inputs_;
  pyinterop::OwnedRef allocator_;  // empty: the default host allocator
  std::shared_ptr<ResponseQueue> queue_;
  int preferred_type_ = -1;
  int64_t preferred_id_ = 0;
  uint32_t trace_level_ = 0;
  std::shared_ptr<TraceSink> trace_sink_;  // null: not traced

  mutable std::mutex mutex_;
  bool sent_ = false;
  TRITONSERVER_InferenceRequest* request_ = nullptr;  // the core's, while in flight
  std::vector<pyinterop::OwnedRef> owners_;           // of the input data
  std::shared_ptr<Request> in_flight_;                // self, while the core holds it
  std::shared_ptr<TraceRecorder> trace_;              // sent with a trace: its records
  std::shared_ptr<PoolBucket> bucket_;                // where the core request goes back
  RequestShape core_shape_;                           // what the core request holds
};

// The next response of `request` (a binding InferenceRequest), waited for
// without the GIL, as an InferenceResponse of `model` (pop_response with no
// timeout): a new reference, or null with the Python error set.
PyObject* WaitForResponse(PyObject* request, PyObject* model, PyObject* request_id);

// The next response of `request` if it has arrived (try_pop_response): an
// InferenceResponse of `model`, None when none is there, or null with the
// Python error set. A new reference.
PyObject* TakeArrivedResponse(PyObject* request, PyObject* model, PyObject* request_id);

class LoopNotifier;

// watch(): `future` completes through `notifier` at `request`'s next
// arrival. 1: watched; 0: a response is there already (nothing watched);
// -1: the Python error set.
int WatchNextResponse(PyObject* request, LoopNotifier& notifier, PyObject* future);

// send_arrays: a binding InferenceRequest of `inputs` (a dict of name to
// array) for `model` (str) version `version` (int) of `server` (a binding
// Server), sent, when every input is a C-contiguous numpy array of a
// fixed-size type; else None, and nothing is sent. A new reference, or null
// with the Python error set.
PyObject* SendArrayInputs(PyObject* server, PyObject* model, PyObject* version, PyObject* inputs);

void RegisterRequest(pybind11::module_& m);

}  // namespace tritonpy
