// The instances a backend sees behind one core instance.
//
// Core 2.51 can crash while it tears down a model that has two or more
// instances on separate backend threads (docs/reliability.md). So the
// tritonserver package asks the core for one instance and tells the backend,
// in the model parameter "tritonserver.workers", how many the user's
// instance_group asked for. The SDK then creates that many Instance objects
// (each initialized and finalized through the backend's hooks, each with its
// own state and name, as N core instances would be) and one worker thread
// for each. The core's Execute hands its batch to a free worker and returns,
// blocking while all N are busy, so N batches run at once as with N core
// instances and the core's batcher forms the next batch as soon as a worker
// is free. One Instance never runs two batches at once.
//
// Part of backend.h (it needs the Backend class): include that file.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "tritonserver/backend/error.h"
#include "tritonserver/backend/model.h"
#include "tritonserver/backend/request.h"

namespace tritonserver::backend::detail {

// The model parameter through which the package passes the instance count.
inline constexpr const char* kWorkersParameter = "tritonserver.workers";

// How many Instances one core instance of `model` stands for (1 when the
// parameter is absent).
inline uint32_t WorkerCount(const Model& model) {
  const std::optional<std::string> text = model.Parameter(kWorkersParameter);
  if (!text) return 1;
  try {
    size_t used = 0;
    const long value = std::stol(*text, &used);
    if (used == text->size() && value >= 1 && value <= 1024) {
      if (value > 1 && model.sequence_batching()) {
        // Batches of one sequence must run in order, on the slot's instance.
        throw Error::InvalidArgument(
            "model '" + model.name() + "': parameter " + kWorkersParameter +
            " cannot run a sequence batching model on several workers; give it instances "
            "with instance_group instead");
      }
      return static_cast<uint32_t>(value);
    }
  } catch (const Error&) {
    throw;
  } catch (...) {  // not a number: refused below
  }
  throw Error::InvalidArgument("model '" + model.name() + "': parameter " + kWorkersParameter +
                               " must be a whole number from 1 to 1024, not '" + *text + "'");
}

// One batch handed to a worker.
struct Job {
  std::unique_ptr<Requests> batch;
  uint64_t exec_start = 0;
};

// The state the worker threads share with the pool; each thread holds it,
// so a thread that is detached (see ~WorkerPool) never outlives it.
struct PoolState {
  std::mutex mutex;
  std::condition_variable work;  // a job arrived, or stop
  std::condition_variable idle;  // a worker became free
  std::vector<Job> jobs;         // per worker; a null batch is no job
  std::vector<bool> busy;
  bool stopping = false;
};

// N worker threads, one per Instance, running batches with `run`.
class WorkerPool {
 public:
  using RunFn = void (*)(Instance&, Requests&, uint64_t exec_start);

  WorkerPool(std::vector<std::unique_ptr<Instance>>& instances, RunFn run)
      : state_(std::make_shared<PoolState>()) {
    state_->jobs.resize(instances.size());
    state_->busy.assign(instances.size(), false);
    threads_.reserve(instances.size());
    try {
      for (size_t k = 0; k < instances.size(); ++k) {
        threads_.emplace_back(&WorkerPool::Loop, state_, instances[k].get(), k, run);
      }
    } catch (...) {  // no thread to be had: end those started
      Stop();
      throw;
    }
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  ~WorkerPool() { Stop(); }

  // Blocks until a worker is free, reserves it and returns its index.
  size_t Acquire() {
    std::unique_lock<std::mutex> lock(state_->mutex);
    for (;;) {
      for (size_t k = 0; k < state_->busy.size(); ++k) {
        if (!state_->busy[k]) {
          state_->busy[k] = true;
          return k;
        }
      }
      state_->idle.wait(lock);
    }
  }

  // Gives back a reserved worker that got no job.
  void Cancel(size_t k) {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->busy[k] = false;
    }
    state_->idle.notify_one();
  }

  // Hands `job` to the reserved worker `k`.
  void Start(size_t k, Job job) {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->jobs[k] = std::move(job);
    }
    state_->work.notify_all();
  }

 private:
  // Lets each worker finish the batch it holds, then ends the threads. A
  // worker never joins itself: if the last reference to the model was
  // dropped on a worker thread, that thread is detached and ends on its own.
  void Stop() noexcept {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->stopping = true;
    }
    state_->work.notify_all();
    for (std::thread& thread : threads_) {
      if (thread.get_id() == std::this_thread::get_id()) {
        thread.detach();
      } else if (thread.joinable()) {
        thread.join();
      }
    }
  }

  static void Loop(std::shared_ptr<PoolState> state, Instance* instance, size_t k, RunFn run) {
    std::unique_lock<std::mutex> lock(state->mutex);
    for (;;) {
      state->work.wait(lock, [&] { return state->stopping || state->jobs[k].batch != nullptr; });
      if (state->jobs[k].batch == nullptr) return;  // stopping, nothing left
      Job job = std::move(state->jobs[k]);
      state->jobs[k] = Job{};
      lock.unlock();
      run(*instance, *job.batch, job.exec_start);
      job.batch.reset();
      lock.lock();
      state->busy[k] = false;
      state->idle.notify_one();
    }
  }

  std::shared_ptr<PoolState> state_;
  std::vector<std::thread> threads_;
};

// What the SDK keeps as the state of one core instance: the backend's
// Instances (one, or the worker count) and, with more than one, the pool.
class InstanceSet {
 public:
  InstanceSet(TRITONBACKEND_ModelInstance* handle, Model& model) {
    const uint32_t count = WorkerCount(model);
    instances_.reserve(count);
    try {
      for (uint32_t k = 0; k < count; ++k) {
        auto instance = std::make_unique<Instance>(handle, model, k);
        model.backend().InstanceInitialize(*instance);
        instances_.push_back(std::move(instance));  // reserved: no throw
      }
    } catch (...) {
      LogIfError(FinalizeInstances(), "finalizing the instances initialized before a failure");
      throw;
    }
  }
  InstanceSet(const InstanceSet&) = delete;
  InstanceSet& operator=(const InstanceSet&) = delete;
  ~InstanceSet() { LogIfError(Finalize(), "finalizing a model instance"); }

  // Starts the workers (with more than one Instance).
  void StartWorkers(WorkerPool::RunFn run) {
    if (instances_.size() > 1) pool_ = std::make_unique<WorkerPool>(instances_, run);
  }

  WorkerPool* pool() const { return pool_.get(); }
  Instance& instance(size_t k) const { return *instances_[k]; }

  // Ends the workers, then runs the backend's InstanceFinalize for each
  // Instance (once: later calls do nothing); returns the first error.
  TRITONSERVER_Error* Finalize() noexcept {
    pool_.reset();
    return FinalizeInstances();
  }

 private:
  TRITONSERVER_Error* FinalizeInstances() noexcept {
    TRITONSERVER_Error* first = nullptr;
    while (!instances_.empty()) {
      Instance& instance = *instances_.back();
      TRITONSERVER_Error* error =
          Guard([&] { instance.model().backend().InstanceFinalize(instance); });
      if (first == nullptr) {
        first = error;
      } else {
        LogIfError(error, "finalizing a model instance");
      }
      instances_.pop_back();
    }
    return first;
  }

  std::vector<std::unique_ptr<Instance>> instances_;
  std::unique_ptr<WorkerPool> pool_;
};

}  // namespace tritonserver::backend::detail
