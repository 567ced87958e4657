// Responses: the owned TRITONSERVER_InferenceResponse, and the sink the
// core's completion callback pushes them into.
#pragma once

#include <pybind11/pybind11.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>

#include "bindings/server.h"
#include "triton/tritonserver.h"

namespace tritonpy {

class Response {
 public:
  Response(std::shared_ptr<ServerHandle> server,
           TRITONSERVER_InferenceResponse* response)
      : server_(std::move(server)), response_(response) {}
  ~Response();
  Response(const Response&) = delete;
  Response& operator=(const Response&) = delete;
  TRITONSERVER_InferenceResponse* get() const { return response_; }

 private:
  std::shared_ptr<ServerHandle> server_;  // deleted after the response
  TRITONSERVER_InferenceResponse* response_;
};

// Receives the responses of one request. The core pushes from its threads
// without the GIL; Python takes them out, waiting with the GIL released.
class ResponseSink {
 public:
  explicit ResponseSink(std::shared_ptr<ServerHandle> server)
      : server_(std::move(server)) {}
  ~ResponseSink();

  // Core side (any thread, no GIL): takes ownership of `response`.
  void Push(TRITONSERVER_InferenceResponse* response, uint32_t flags) noexcept;

  // Python side. Each returns (Response or None, flags), or None when
  // nothing arrived (TryGet) or the wait timed out (Get).
  pybind11::object Get(double timeout_s);
  pybind11::object TryGet();
  // Called with the GIL each time something arrives (asyncio wake-ups).
  void SetNotifier(pybind11::object notifier);
  bool Finished();

  // The completion callback registered with the core; userp is a
  // heap-allocated shared_ptr<ResponseSink>, freed at the final flag.
  static void OnComplete(TRITONSERVER_InferenceResponse* response,
                         uint32_t flags, void* userp);

 private:
  struct Item {
    TRITONSERVER_InferenceResponse* response;
    uint32_t flags;
  };
  pybind11::object Wrap(const Item& item);

  std::shared_ptr<ServerHandle> server_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Item> items_;
  bool final_seen_ = false;
  PyObject* notifier_ = nullptr;  // strong reference; changed under the GIL
  PyObject* notifier_error_ = nullptr;  // exception raised by the notifier
};

void RegisterResponse(pybind11::module_& m);

}  // namespace tritonpy
