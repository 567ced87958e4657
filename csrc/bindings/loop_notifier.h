// Waking asyncio event loops from the core's threads without the GIL.
//
// One LoopNotifier per event loop: the loop watches fd() (an eventfd) with
// add_reader(fd, notifier.wake). A reader that must wait for a request's
// next response calls Watch(queue, future): the queue gets a waker that, at
// the next arrival, records the future's token here and writes the eventfd
// if nothing was pending (a core thread, no GIL, no Python object touched).
// The loop then calls Wake(), which completes the futures of every token
// since the last call: a burst of completions costs one wake-up.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "bindings/response_queue.h"
#include "pyinterop/ref.h"

namespace tritonpy {

class LoopNotifier : public std::enable_shared_from_this<LoopNotifier> {
 public:
  LoopNotifier();
  ~LoopNotifier();
  LoopNotifier(const LoopNotifier&) = delete;
  LoopNotifier& operator=(const LoopNotifier&) = delete;

  int fd() const { return fd_; }
  // Any thread, no GIL.
  void Notify(uint64_t token) noexcept;
  // The loop's thread (with the GIL): `future` completes (set_result(None))
  // at `queue`'s next arrival; false (and nothing watched) when a response
  // is already there.
  bool Watch(ResponseQueue& queue, pybind11::object future);
  // The loop's thread: completes the futures notified since the last call.
  void Wake();

 private:
  int fd_;
  std::mutex mutex_;
  std::vector<uint64_t> ready_;
  // The loop's thread only.
  uint64_t next_token_ = 1;
  std::unordered_map<uint64_t, pyinterop::OwnedRef> waiting_;
};

void RegisterLoopNotifier(pybind11::module_& m);

}  // namespace tritonpy
