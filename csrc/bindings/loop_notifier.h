// Waking an asyncio event loop from the core's threads without the GIL.
//
// One LoopNotifier per event loop: the loop watches fd() (an eventfd) with
// add_reader. A core thread that completes a response someone awaits calls
// Notify(token): it records the token and, if none was pending, writes the
// eventfd. The loop's reader callback calls Take() for every token since
// the last call and wakes those iterators. No Python object is touched on
// the core's threads, and a burst of completions costs one wake-up.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <mutex>
#include <vector>

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

void RegisterLoopNotifier(pybind11::module_& m);

}  // namespace tritonpy
