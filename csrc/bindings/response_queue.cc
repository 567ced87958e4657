#include "bindings/response_queue.h"

#include <pybind11/stl.h>
#include <pybind11/typing.h>

#include <algorithm>
#include <chrono>

#include "bindings/errors.h"
#include "bindings/first_response.h"
#include "bindings/loop_notifier.h"
#include "pyinterop/gil.h"

namespace py = pybind11;

namespace tritonpy {

pyinterop::OwnedRef PythonWaker::Wake() noexcept {
  pyinterop::AcquireGil gil;
  if (!gil.held()) return {};
  PyObject* result = PyObject_CallNoArgs(callable_.get());
  if (result != nullptr) {
    Py_DECREF(result);
    return {};
  }
  // Kept for the reader instead of lost on this thread.
  PyObject *type, *value, *trace;
  PyErr_Fetch(&type, &value, &trace);
  PyErr_NormalizeException(&type, &value, &trace);
  if (trace != nullptr && value != nullptr) PyException_SetTraceback(value, trace);
  Py_XDECREF(type);
  Py_XDECREF(trace);
  return pyinterop::OwnedRef::Steal(value);
}

void ResponseQueue::SetWaker(std::shared_ptr<Waker> waker, bool always) {
  std::shared_ptr<Waker> old;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    old = std::move(waker_);
    waker_ = std::move(waker);
    always_ = always;
    armed_ = false;
  }
  // `old` dies here, outside the lock (a Python waker takes the GIL to die).
}

void ResponseQueue::OnComplete(TRITONSERVER_InferenceResponse* response, uint32_t flags,
                               void* userp) {
  ResponseQueue& queue = *static_cast<ResponseQueue*>(userp);
  std::unique_ptr<ResponseRecord> record(queue.spare_.exchange(nullptr));
  try {
    if (response != nullptr) {
      if (queue.sent_ns_ != 0) {
        FirstResponseHistogram::Get().Observe(response, queue.sent_ns_);
        queue.sent_ns_ = 0;
      }
      ReadResponse(response, flags, queue.labels_, record);
    } else if (!record) {
      record = std::make_unique<ResponseRecord>();
    }
    record->flags = flags;
  } catch (const std::exception& e) {
    try {
      record = ErrorRecord(flags, TRITONSERVER_ERROR_INTERNAL,
                           std::string("cannot read the response: ") + e.what());
    } catch (...) {  // out of memory: the reader learns nothing of this one
    }
  }
  // At the final response the queue may go with its hold on itself: taken
  // here, it goes last, after the push.
  std::shared_ptr<ResponseQueue> self;
  if (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) self = std::move(queue.self_);
  if (record) queue.Push(std::move(record));
}

void ResponseQueue::Push(std::unique_ptr<ResponseRecord> record) noexcept {
  std::shared_ptr<Waker> waker;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (abandoned_) return;  // the reader was told it is over: drop the rest
    if (record->final()) final_seen_ = true;
    if (head_ == records_.size()) {  // all taken: start over
      records_.clear();
      head_ = 0;
    }
    records_.push_back(std::move(record));
    if (always_ || armed_) waker = waker_;
    armed_ = false;
  }
  ready_.notify_all();
  if (waker == nullptr) return;
  pyinterop::OwnedRef error = waker->Wake();
  if (!error) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!waker_error_) waker_error_ = std::move(error);
  // else `error` dies at return, with the GIL (OwnedRef)
}

bool ResponseQueue::Abandon(TRITONSERVER_Error_Code code, const std::string& message) noexcept {
  try {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (final_seen_ || abandoned_) return false;
    }
    Push(ErrorRecord(TRITONSERVER_RESPONSE_COMPLETE_FINAL, code, message));
    std::lock_guard<std::mutex> lock(mutex_);
    abandoned_ = true;
    return true;
  } catch (...) {
    return false;
  }
}

std::unique_ptr<ResponseRecord> ResponseQueue::TryTake() {
  std::unique_ptr<ResponseRecord> record;
  pyinterop::OwnedRef error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error = std::move(waker_error_);
    if (!error) {
      if (!Waiting()) return nullptr;
      record = std::move(records_[head_++]);
    }
  }
  if (error) {
    PyObject* exception = error.get();
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception)), exception);
    throw py::error_already_set();
  }
  return record;
}

std::unique_ptr<ResponseRecord> ResponseQueue::Take(double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const bool forever = timeout_s < 0;
  {  // most often it is there already, or comes within the first wait
    std::lock_guard<std::mutex> lock(mutex_);
    if (Waiting() && !waker_error_) return std::move(records_[head_++]);
  }
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(forever ? 0 : timeout_s));
  // Waits in short slices, so that Ctrl-C (a pending signal) interrupts.
  const auto slice = std::chrono::milliseconds(100);
  while (true) {
    bool have = false;
    {
      py::gil_scoped_release unlocked;  // the core's threads push meanwhile
      std::unique_lock<std::mutex> lock(mutex_);
      auto until = forever ? Clock::now() + slice : std::min(deadline, Clock::now() + slice);
      have = ready_.wait_until(lock, until, [this] { return Waiting() || bool(waker_error_); });
    }
    if (have) {
      std::unique_ptr<ResponseRecord> record = TryTake();  // another reader may have won
      if (record) return record;
    }
    if (!forever && Clock::now() >= deadline) return nullptr;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
}

bool ResponseQueue::finished() {
  std::lock_guard<std::mutex> lock(mutex_);
  return final_seen_ || abandoned_;
}

bool ResponseQueue::Arm() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (Waiting() || waker_error_) return false;
  armed_ = true;
  return true;
}

}  // namespace tritonpy
