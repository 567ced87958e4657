#include "bindings/loop_notifier.h"

#include <pybind11/stl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "bindings/errors.h"

namespace py = pybind11;

namespace tritonpy {

LoopNotifier::LoopNotifier() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) {
    throw Error(TRITONSERVER_ERROR_INTERNAL,
                      std::string("eventfd failed: ") + std::strerror(errno));
  }
}

LoopNotifier::~LoopNotifier() { close(fd_); }

void LoopNotifier::Notify(uint64_t token) noexcept {
  bool first = false;
  try {
    std::lock_guard<std::mutex> lock(mutex_);
    first = ready_.empty();
    ready_.push_back(token);
  } catch (...) {
    return;  // out of memory: the reader's next turn finds the others
  }
  if (first) {
    uint64_t one = 1;
    // Non-blocking; the only failure (counter overflow) cannot happen here.
    [[maybe_unused]] ssize_t n = write(fd_, &one, sizeof(one));
  }
}

std::vector<uint64_t> LoopNotifier::Take() {
  uint64_t count = 0;
  [[maybe_unused]] ssize_t n = read(fd_, &count, sizeof(count));  // resets; EAGAIN is fine
  std::vector<uint64_t> out;
  std::lock_guard<std::mutex> lock(mutex_);
  out.swap(ready_);
  return out;
}

void RegisterLoopNotifier(py::module_& m) {
  py::class_<LoopNotifier, std::shared_ptr<LoopNotifier>>(m, "LoopNotifier")
      .def(py::init<>())
      .def("fd", &LoopNotifier::fd, "The eventfd the loop watches.")
      .def("take", &LoopNotifier::Take, "The tokens notified since the last call.");
}

}  // namespace tritonpy
