// Waking an asyncio event loop from the core's threads without the GIL.
//
// One LoopNotifier per event loop: the loop watches fd() (an eventfd) with
// add_reader. A core thread that completes a response someone awaits calls
// Notify(token): it records the token and, if none was pending, writes the
// eventfd. The loop's reader callback calls Take() for every token since
// the last call and wakes those readers. No Python object is touched on
// the core's threads, and a burst of completions costs one wake-up.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "bindings/response_queue.h"

namespace tritonpy {

class LoopNotifier {
 public:
  LoopNotifier();
  ~LoopNotifier();
  LoopNotifier(const LoopNotifier&) = delete;
  LoopNotifier& operator=(const LoopNotifier&) = delete;

  int fd() const { return fd_; }
  void Notify(uint64_t token) noexcept;  // any thread, no GIL
  std::vector<uint64_t> Take();          // the loop's thread

 private:
  int fd_;
  std::mutex mutex_;
  std::vector<uint64_t> ready_;
};

// A ResponseQueue's waker for a reader on an event loop.
class LoopWaker final : public Waker {
 public:
  LoopWaker(std::shared_ptr<LoopNotifier> notifier, uint64_t token)
      : notifier_(std::move(notifier)), token_(token) {}
  pyinterop::OwnedRef Wake() noexcept override {
    notifier_->Notify(token_);
    return {};
  }

 private:
  std::shared_ptr<LoopNotifier> notifier_;
  uint64_t token_;
};

void RegisterLoopNotifier(pybind11::module_& m);

}  // namespace tritonpy
