#include "bindings/deferred_delete.h"

#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>

#include "bindings/errors.h"
#include "core_api.h"
#include "pyinterop/gil.h"

namespace tritonpy {
namespace {

void Handle(Released& item) noexcept {
  if (item.request != nullptr) {
    ErrorPtr ignored(Core().TRITONSERVER_InferenceRequestDelete(item.request));
  }
  if (item.in_flight) item.in_flight->fetch_sub(1);
  item.server.reset();  // may be the last reference: ServerDelete
}

// One thread per process, started at the first release (again in a forked
// child, which has no copy of it). Never destroyed: releases can come until
// the process exits.
class Deleter {
 public:
  // Takes `item` only when it returns (it is left as it was if this throws).
  void Add(Released& item) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (pid_ != getpid()) Start();
    const bool was_empty = items_.empty();
    items_.push_back(std::move(item));
    lock.unlock();
    if (was_empty) ready_.notify_one();
  }

 private:
  void Start() {  // with mutex_ held
    std::thread(&Deleter::Loop, this).detach();
    pid_ = getpid();
    items_.clear();  // a forked child's copies belong to its parent
  }

  void Loop() {
    // A Python thread state for this thread's life, made once: a server
    // deleted here finalizes backends that may take the GIL, and a thread
    // state made and freed per use races tracemalloc in CPython 3.11 (a
    // crash seen in the leak tests).
    if (pyinterop::PythonAlive()) pyinterop::ThreadGil prime;
    std::deque<Released> batch;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      ready_.wait(lock, [&] { return !items_.empty(); });
      batch.swap(items_);
      lock.unlock();
      for (Released& item : batch) Handle(item);
      batch.clear();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Released> items_;
  pid_t pid_ = 0;
};

Deleter& TheDeleter() {
  static auto* deleter = new Deleter();
  return *deleter;
}

}  // namespace

void DeleteLater(Released item) noexcept {
  try {
    TheDeleter().Add(item);
  } catch (...) {
    Handle(item);
  }
}

}  // namespace tritonpy
