// The Python objects the inprocess backend hands to
// tritonserver._inprocess (module tritonserver._inprocess._backend, typed in
// python/tritonserver/_inprocess/_backend.pyi):
//
//  - RequestHandle: one request of a batch. Python reads its inputs and
//    metadata and answers it through it (send, fail, finish). During Execute
//    it refers to the SDK's request; if Python still holds the handle when
//    execute returns (a decoupled model's response sender, an input array
//    kept past execute), Execute moves the request into it
//    (tb::Requests::Keep), and the request is released when the handle is
//    garbage.
//  - Input: one input tensor (a typed record: name, datatype, shape, memory
//    type), whose data is read zero copy through the buffer protocol (read
//    only). It holds its handle, so the data stays valid while any numpy
//    array over it lives.
//
// Locking: every core call that can run a callback (sending, releasing) is
// made without the GIL; a handle's mutex is only ever taken without the GIL,
// so a callback that takes the GIL never waits on a thread that holds the
// GIL and waits on the mutex.
#pragma once

#include <pybind11/pybind11.h>
#include <tritonserver/backend.h>

#include <memory>
#include <mutex>
#include <string>

namespace inprocess {

namespace tb = tritonserver::backend;
namespace py = pybind11;

class RequestHandle {
 public:
  explicit RequestHandle(tb::Request& request) : request_(&request) {}
  ~RequestHandle();
  RequestHandle(const RequestHandle&) = delete;
  RequestHandle& operator=(const RequestHandle&) = delete;

  // For Execute, with the GIL.
  tb::Request& request() const { return *request_; }
  void Own(std::unique_ptr<tb::Request> kept) { owned_ = std::move(kept); }
  // Fails the request unless it finished (the GIL is released inside).
  void FailIfOpen(TRITONSERVER_Error_Code code, const std::string& message);

  // Python methods (with the GIL).
  void Send(py::handle outputs, py::handle parameters, bool final);
  // The implicit state of the request's sequence (sequence_batching
  // state): each Output becomes the named state the next request of the
  // sequence reads. Before the response is sent.
  void UpdateStates(py::handle states);
  void Fail(int code, const std::string& message);
  // A non-final error response of a decoupled request (more may follow).
  void SendError(int code, const std::string& message);
  // TRITONSERVER_REQUEST_RELEASE_RESCHEDULE when the backend is done with it.
  void SetRescheduled(bool reschedule);
  bool rescheduled();
  void Finish();
  bool IsCancelled();
  bool finished();
  // Python answers it later, after Execute returned (an async execute).
  void Defer() { deferred_ = true; }
  bool deferred() const { return deferred_; }
  // A response sender holds it (a model that is not decoupled may answer
  // through one, the python backend's way): deferred, and not failed when
  // execute returns no response for it.
  void Hold() { deferred_ = held_ = true; }
  bool held() const { return held_; }
  std::string Id();
  py::object CorrelationId();
  uint32_t Flags();
  uint64_t TimeoutUs();
  py::tuple RequestedOutputs();
  py::dict Parameters();
  // The request's trace context (TRITONSERVER_InferenceTraceContext, JSON;
  // trace mode opentelemetry puts the request span's traceparent there), or
  // None when the request is not traced or the context is empty.
  py::object TraceContext();

 private:
  tb::Request* request_;
  std::unique_ptr<tb::Request> owned_;  // set once kept past Execute
  std::mutex mutex_;
  bool deferred_ = false;  // set and read with the GIL
  bool held_ = false;      // likewise
};

// Adds RequestHandle and Input to `module`.
void RegisterHandleTypes(py::module_& module);

// The inputs of the request behind `handle` (a RequestHandle), as a tuple
// of Input records.
py::tuple Inputs(py::object handle);

}  // namespace inprocess
