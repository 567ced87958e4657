// Core requests are deleted on a thread of the binding's own, never inside
// the core's release callback. That callback runs on a backend thread (or
// on a worker the backend runs its batches on), and deleting a request can
// drop the last reference to its model: the core then starts tearing the
// model down while that thread is still inside the backend, a window in
// which core 2.51 reads freed memory (docs/reliability.md). The deleting
// thread is no backend's and no instance's, so no finalize ever joins it;
// Python threads that send requests delete what is queued too.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "bindings/request_pool.h"

#include "triton/tritonserver.h"

namespace tritonpy {

// Handled in this order: the core request is deleted (or kept), counted out of
// `in_flight`, then `server` is dropped: it keeps the core server (a
// ServerHandle) alive until its request is deleted, since deleting a request
// after its server would free the model under it. Nothing here needs Python.
// A request with a `bucket` is kept there for reuse instead, if the bucket
// takes it (request_pool.h), with `shape`, what it holds.
struct Released {
  TRITONSERVER_InferenceRequest* request = nullptr;
  std::shared_ptr<std::atomic<int64_t>> in_flight;
  std::shared_ptr<void> server;
  std::shared_ptr<PoolBucket> bucket;
  RequestShape shape;
};

// Queues `item` for the deleting thread. Never throws: if the item cannot
// be queued (out of memory), it is handled at once on this thread.
void DeleteLater(Released item) noexcept;

// Handles what is queued on the calling thread, which must be no backend's
// (the binding calls it from Python threads, before it sends a request).
void DeleteReleased() noexcept;

}  // namespace tritonpy
