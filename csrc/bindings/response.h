// Responses. The core's completion callback reads each response at once,
// on the core's thread and without the GIL, into plain data (ResponseData):
// error, id, parameters and output descriptions, each output holding a
// reference to its buffer (memory the core owns rather than our allocator
// is copied into one). The core response is then deleted right there, so no
// response ever keeps a model, or a stopping server, waiting on what the
// program does with its tensors. Python builds its objects from the
// plain data when it takes a response out of the sink.
#pragma once

#include <pybind11/pybind11.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "bindings/allocator.h"
#include "bindings/loop_notifier.h"
#include "bindings/user_allocator.h"
#include "triton/tritonserver.h"

namespace tritonpy {

struct OutputData {
  std::string name;
  int datatype = 0;
  std::vector<int64_t> shape;
  uintptr_t data_ptr = 0;
  size_t byte_size = 0;
  int memory_type = 0;
  int64_t memory_type_id = 0;
  OutputBuffer* buffer = nullptr;  // one reference; null for an empty output
};

struct ResponseData {
  bool has_error = false;
  int error_code = 0;
  std::string error_message;
  std::string request_id;
  std::string model_name;
  int64_t model_version = -1;
  std::vector<std::pair<std::string, std::variant<std::string, int64_t, bool, double>>> parameters;
  std::vector<OutputData> outputs;
  std::string classification_label;  // empty: none asked for, or no label
  ~ResponseData();
};

// Receives the responses of one request. The core pushes from its threads
// without the GIL; Python takes them out, waiting with the GIL released.
class ResponseSink {
 public:
  ResponseSink() = default;
  ~ResponseSink();

  // The Python allocator for this request's outputs, kept as long as the
  // sink (the core may allocate until the final response).
  void SetUserAllocator(std::unique_ptr<class UserAllocator> allocator);
  UserAllocator* user_allocator() const { return user_allocator_.get(); }

  // Core side (any thread, no GIL): reads and deletes `response`.
  void Push(TRITONSERVER_InferenceResponse* response, uint32_t flags) noexcept;
  // Ends the request for its reader: a final response carrying `code` and
  // `message`, unless the final one already came. Whatever the core sends
  // later is discarded. Returns whether it ended it.
  bool Abandon(TRITONSERVER_Error_Code code, const std::string& message) noexcept;

  // Python side. Each returns (flags, payload) with payload None (a final
  // flag alone) or (error or None, request_id, model, version, parameters,
  // [(name, datatype, shape, data_ptr, byte_size, memory_type,
  // memory_type_id, owner)], classification label or None); or None when
  // nothing arrived (TryGet) or the wait timed out (Get).
  pybind11::object Get(double timeout_s);
  pybind11::object TryGet();
  // `notifier` is called with the GIL, on the pushing thread: at every
  // arrival when `always`, else only for the first arrival after Arm().
  void SetNotifier(pybind11::object notifier, bool always);
  // Asks for one notification at the next arrival; false (and no request)
  // when something is already there to take.
  bool Arm();
  // Notify through `notifier` (no GIL) with `token` instead, when armed.
  void SetLoopNotifier(std::shared_ptr<class LoopNotifier> notifier, uint64_t token);
  // Read the top class's label of the first output of each response.
  void SetClassify(bool classify) { classify_ = classify; }

  // The completion callback registered with the core; userp is a
  // heap-allocated shared_ptr<ResponseSink>, freed at the final flag.
  static void OnComplete(TRITONSERVER_InferenceResponse* response,
                         uint32_t flags, void* userp);

 private:
  struct Item {
    std::unique_ptr<ResponseData> data;  // null: a final flag alone
    uint32_t flags;
  };
  std::unique_ptr<ResponseData> Read(TRITONSERVER_InferenceResponse* response) const;
  void Deliver(Item item) noexcept;
  static pybind11::object ToPython(Item& item);

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Item> items_;
  bool final_seen_ = false;
  bool abandoned_ = false;
  bool classify_ = false;  // set before the request is sent
  bool notify_always_ = true;
  bool armed_ = false;
  std::unique_ptr<UserAllocator> user_allocator_;
  std::shared_ptr<LoopNotifier> loop_notifier_;
  uint64_t loop_token_ = 0;
  PyObject* notifier_ = nullptr;  // strong reference; changed under the GIL
  PyObject* notifier_error_ = nullptr;  // exception raised by the notifier
};

void RegisterResponse(pybind11::module_& m);

}  // namespace tritonpy
