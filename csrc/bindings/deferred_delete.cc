#include "bindings/deferred_delete.h"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "bindings/errors.h"
#include "core_api.h"
#include "pyinterop/gil.h"

namespace tritonpy {
namespace {

void Handle(Released& item) noexcept {
  if (item.request != nullptr && item.bucket != nullptr) {
    PooledRequest kept{item.request, std::move(item.shape)};
    try {
      if (item.bucket->Keep(kept)) item.request = nullptr;
    } catch (...) {  // out of memory: deleted below instead
    }
    item.bucket.reset();
  }
  if (item.request != nullptr) {
    ErrorPtr ignored(Core().TRITONSERVER_InferenceRequestDelete(item.request));
  }
  if (item.in_flight) item.in_flight->fetch_sub(1);
  item.server.reset();  // may be the last reference: ServerDelete
}

// The queue of released requests and the thread that deletes them. Most are
// deleted by the next request sent from Python (Drain, on a Python thread:
// no wake-up, no context switch on the hot path); the thread takes what is
// left. While releases come it looks every 20 ms without being woken;
// after a quiet spell it waits, and the next release wakes it. Started at
// the first release; a forked child gets a new Deleter (it has no copy of
// the thread, and the mutex may have been held at the fork). Never
// destroyed: releases can come until the process exits.
class Deleter {
 public:
  // Takes `item` only when it returns (it is left as it was if this throws).
  void Add(Released& item) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!started_) Start();
    items_.push_back(std::move(item));
    const bool wake = waiting_;
    waiting_ = false;
    lock.unlock();
    if (wake) ready_.notify_one();
  }

  // Deletes what is queued, on the calling thread, unless another thread
  // holds the queue right now. Called before every send, so it allocates
  // nothing: the batch takes this thread's spare storage, swaps it with the
  // queue's, and leaves its own behind as the next spare. (A send from inside
  // Handle, a model's finalize sending, finds the spare taken and swaps an
  // empty vector in.)
  void Drain() noexcept {
    thread_local std::vector<Released> spare;
    std::vector<Released> batch = std::move(spare);
    {
      std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
      if (!lock.owns_lock() || items_.empty()) {
        spare = std::move(batch);
        return;
      }
      batch.swap(items_);
    }
    for (Released& item : batch) Handle(item);
    batch.clear();
    spare = std::move(batch);
  }

 private:
  // Each look takes the CPU from whatever runs there: at 2 ms, one request
  // in 200 of a synchronous loop pinned to one CPU took the hit, enough to
  // double its p99 latency (benchmarks/README.md).
  static constexpr std::chrono::milliseconds kLook{20};
  static constexpr int kQuietLooks = 10;  // then it waits to be woken

  void Start() {  // with mutex_ held
    std::thread(&Deleter::Loop, this).detach();
    started_ = true;
  }

  void Loop() {
    std::vector<Released> batch;
    int quiet = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (items_.empty() && quiet >= kQuietLooks) {
        // waiting_ is set again after each wake-up that found nothing: a
        // Python thread may have drained what the waking Add queued.
        while (items_.empty()) {
          waiting_ = true;
          ready_.wait(lock);
        }
        waiting_ = false;
      } else {
        ready_.wait_for(lock, kLook);
      }
      if (items_.empty()) {
        ++quiet;
        continue;
      }
      quiet = 0;
      batch.swap(items_);
      lock.unlock();
      for (Released& item : batch) Handle(item);
      batch.clear();
      lock.lock();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<Released> items_;
  bool waiting_ = false;  // on ready_ with nothing to do: the next Add wakes it
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

void DeleteReleased() noexcept { TheDeleter().Drain(); }

void DeleteLater(Released item) noexcept {
  try {
    TheDeleter().Add(item);
  } catch (...) {
    Handle(item);
  }
}

}  // namespace tritonpy
