#include "bindings/loop_notifier.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "bindings/errors.h"

namespace py = pybind11;

namespace tritonpy {
namespace {

// A ResponseQueue's waker for a reader waiting on an event loop.
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

}  // namespace

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

bool LoopNotifier::Watch(ResponseQueue& queue, py::object future) {
  const uint64_t token = next_token_++;
  queue.SetWaker(std::make_shared<LoopWaker>(shared_from_this(), token), false);
  if (!queue.Arm()) return false;
  waiting_.emplace(token, pyinterop::OwnedRef(std::move(future)));
  return true;
}

void LoopNotifier::Wake() {
  uint64_t count = 0;
  [[maybe_unused]] ssize_t n = read(fd_, &count, sizeof(count));  // resets; EAGAIN is fine
  std::vector<uint64_t> tokens;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tokens.swap(ready_);
  }
  static PyObject* const done = PyUnicode_InternFromString("done");
  static PyObject* const set_result = PyUnicode_InternFromString("set_result");
  for (uint64_t token : tokens) {
    auto it = waiting_.find(token);
    if (it == waiting_.end()) continue;
    py::object future = it->second.object();
    waiting_.erase(it);
    // A future whose waiter was cancelled is done already: leave it.
    py::object is_done =
        py::reinterpret_steal<py::object>(PyObject_CallMethodNoArgs(future.ptr(), done));
    if (!is_done) throw py::error_already_set();
    if (is_done.ptr() == Py_True) continue;
    py::object result = py::reinterpret_steal<py::object>(
        PyObject_CallMethodOneArg(future.ptr(), set_result, Py_None));
    if (!result) throw py::error_already_set();
  }
}

void RegisterLoopNotifier(py::module_& m) {
  py::class_<LoopNotifier, std::shared_ptr<LoopNotifier>>(
      m, "LoopNotifier", "Wakes one event loop's waiting readers through an eventfd.")
      .def(py::init<>())
      .def("fd", &LoopNotifier::fd, "The eventfd the loop watches (add_reader).")
      .def("wake", &LoopNotifier::Wake,
           "The loop's reader callback: completes the futures of the responses that arrived.");
}

}  // namespace tritonpy
