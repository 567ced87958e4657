#include "bindings/deferred_delete.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
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

// One thread per process, started at the first release; a forked child gets
// a new Deleter (it has no copy of the thread, and the mutex may have been
// held at the fork). Never destroyed: releases can come until the process
// exits. Under load it is not woken per release: it deletes
// what gathered, pauses, and only waits to be woken once a pause brought
// nothing (a wake-up per request cost a context switch on the hot path).
class Deleter {
 public:
  // Takes `item` only when it returns (it is left as it was if this throws).
  void Add(Released& item) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!started_) Start();
    items_.push_back(std::move(item));
    const bool wake = sleeping_;
    sleeping_ = false;
    lock.unlock();
    if (wake) ready_.notify_one();
  }

 private:
  static constexpr std::chrono::microseconds kPause{500};

  void Start() {  // with mutex_ held
    std::thread(&Deleter::Loop, this).detach();
    started_ = true;
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
      if (items_.empty()) {
        sleeping_ = true;
        ready_.wait(lock, [&] { return !items_.empty(); });
      }
      batch.swap(items_);
      lock.unlock();
      for (Released& item : batch) Handle(item);
      batch.clear();
      std::this_thread::sleep_for(kPause);  // let the next releases gather
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Released> items_;
  bool sleeping_ = false;  // waiting on ready_: the next Add wakes it
  bool started_ = false;
};

std::atomic<Deleter*> the_deleter{nullptr};

void ForkedChild() { the_deleter.store(new Deleter()); }

Deleter& TheDeleter() {
  static const bool registered = [] {
    the_deleter.store(new Deleter());
    pthread_atfork(nullptr, nullptr, &ForkedChild);
    return true;
  }();
  (void)registered;
  return *the_deleter.load(std::memory_order_acquire);
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
