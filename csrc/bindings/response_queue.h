// Where a request's responses wait for Python. The core pushes records from
// its threads without the GIL (ResponseQueue::OnComplete is the completion
// callback); Python pops them, waiting with the GIL released. A Waker tells
// the reader that something arrived: at every arrival, or only for the first
// one after the reader armed the queue (Arm), so that a burst costs one
// wake-up.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/typing.h>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "bindings/response_record.h"
#include "bindings/user_allocator.h"
#include "pyinterop/ref.h"
#include "triton/tritonserver.h"

namespace tritonpy {

class Waker {
 public:
  virtual ~Waker() = default;
  // After an arrival, on the pushing thread, outside the queue's lock and
  // without the GIL. Returns an exception the reader must hear of (empty
  // when none).
  virtual pyinterop::OwnedRef Wake() noexcept = 0;
};

// Calls a Python callable (with the GIL, on the pushing thread).
class PythonWaker final : public Waker {
 public:
  explicit PythonWaker(pybind11::object callable) : callable_(std::move(callable)) {}
  pyinterop::OwnedRef Wake() noexcept override;

 private:
  pyinterop::OwnedRef callable_;
};

class ResponseQueue {
 public:
  ResponseQueue() : spare_(new ResponseRecord()) {}
  ~ResponseQueue() { delete spare_.load(); }
  ResponseQueue(const ResponseQueue&) = delete;
  ResponseQueue& operator=(const ResponseQueue&) = delete;

  // ---- Before the request is sent ----
  // `always`: wake at every arrival; otherwise only when armed. A null
  // waker stops the wake-ups (any time).
  void SetWaker(std::shared_ptr<Waker> waker, bool always);
  void SetClassify(bool classify) { labels_.first_output = classify; }
  void SetLabelOutputs(std::vector<std::string> outputs, bool batched) {
    labels_.outputs = std::move(outputs);
    labels_.batched = batched;
  }
  // The Python allocator of this request's outputs, kept as long as the
  // queue (the core may allocate until the final response).
  void SetUserAllocator(std::unique_ptr<UserAllocator> allocator) {
    user_allocator_ = std::move(allocator);
  }
  UserAllocator* user_allocator() const { return user_allocator_.get(); }
  // Times the first response from `sent_ns` (first_response.h).
  void TimeFirstResponse(uint64_t sent_ns) { sent_ns_ = sent_ns; }

  // ---- Core side (any thread, no GIL) ----
  // Keeps `self` (this queue) alive until the final response (the core's
  // completion callback's userp is the queue itself); Release undoes it
  // when the core refused the request (no callback comes).
  void HoldUntilFinal(std::shared_ptr<ResponseQueue> self) { self_ = std::move(self); }
  void Release() { self_.reset(); }
  // The completion callback; userp is the queue, held until the final flag.
  static void OnComplete(TRITONSERVER_InferenceResponse* response, uint32_t flags, void* userp);
  // Ends the request for its reader: a final error record, unless the final
  // one already came. Whatever the core sends later is dropped. Returns
  // whether it ended it.
  bool Abandon(TRITONSERVER_Error_Code code, const std::string& message) noexcept;

  // ---- Python side ----
  // The next record, or null when none is there; raises a waker's error
  // (once) instead.
  std::unique_ptr<ResponseRecord> TryTake();
  // Waits (without the GIL) up to `timeout_s` (< 0: forever) for the next
  // record; null on timeout.
  std::unique_ptr<ResponseRecord> Take(double timeout_s);
  // Asks for one wake-up at the next arrival; false (and nothing asked)
  // when something is already there to pop.
  bool Arm();
  // Whether the final response came (or the request was abandoned).
  bool finished();

 private:
  void Push(std::unique_ptr<ResponseRecord> record) noexcept;
  bool Waiting() const { return head_ < records_.size(); }  // with mutex_ held

  std::mutex mutex_;
  std::condition_variable ready_;
  // Arrived and not yet taken: records_[head_:]. A vector, not a deque: an
  // empty vector allocates nothing, and most requests see one record.
  std::vector<std::unique_ptr<ResponseRecord>> records_;
  // The record of the first response (most requests have one), made by the
  // thread that makes the queue: the reader frees what its own thread
  // allocated. Made on the core's thread and freed on the reader's, as
  // each record was, it went back to the core thread's malloc arena at
  // every response, past the reader's full cache, and made that arena merge
  // all its free small chunks each time (malloc_consolidate).
  std::atomic<ResponseRecord*> spare_;
  size_t head_ = 0;
  bool final_seen_ = false;
  bool abandoned_ = false;
  bool armed_ = false;
  bool always_ = false;
  LabelRequest labels_;  // set before the request is sent
  // When the request was sent, while its first response is to be timed
  // (0: not timed, or timed already). Only the core's thread that calls
  // OnComplete reads it after the send.
  uint64_t sent_ns_ = 0;
  std::shared_ptr<Waker> waker_;
  pyinterop::OwnedRef waker_error_;  // the first exception a waker returned
  std::unique_ptr<UserAllocator> user_allocator_;
  // The queue itself while the core may still call OnComplete: set before
  // the request is sent, taken by the final response (on the core's
  // thread, which alone calls OnComplete) or Release (the sender's, when no
  // callback will come).
  std::shared_ptr<ResponseQueue> self_;
};

}  // namespace tritonpy
