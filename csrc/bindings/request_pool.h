// Core requests kept to be sent again. Core 2.51 lets a released request be
// sent once more (its state goes from RELEASED back to INITIALIZED), and
// creating, filling and deleting one per inference costs about 0.65 µs of
// a synchronous request of 8.4 on this package's benchmark machine
// (benchmarks/README.md). A kept request is bound to the model version it
// was created for (version -1 resolved then) and keeps that version loaded,
// so:
// - the pool is emptied before and after each model load and unload the
//   binding asks for, and closed at stop; where the core loads models by
//   itself (POLL) there is no pool;
// - only requests that carry nothing but inputs and requested outputs are
//   kept (a request's id, flags, parameters and the like cannot all be
//   taken back);
// - only for models whose scheduler leaves nothing on the request: not an
//   ensemble (each inference adds a release callback to the request), not
//   sequence batching (the sequencer rewrites flags and correlation id and
//   adds release callbacks), not the response cache (the request keeps the
//   cache key of its first inputs).
// Kept requests are deleted on Python threads or the binding's deleting
// thread, never a backend's (deferred_delete.h says why).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "triton/tritonserver.h"

namespace tritonpy {

// An input as a kept request holds it: its data is removed before reuse.
// The core checks an input's data against its shape only when the input is
// added (Normalize), so new data goes into a kept input only where that
// check cannot answer otherwise: same type, shape and byte size, and not
// BYTES (whose check reads the data).
struct PooledInput {
  std::string name;
  int datatype = 0;
  std::vector<int64_t> shape;
  size_t byte_size = 0;
};

// What a core request holds besides its model: inputs and requested outputs.
struct RequestShape {
  std::vector<PooledInput> inputs;
  std::vector<std::string> outputs;
};

// A released core request and what it holds.
struct PooledRequest {
  TRITONSERVER_InferenceRequest* request = nullptr;
  RequestShape shape;
};

// The kept requests of one model version.
class PoolBucket {
 public:
  PoolBucket() = default;
  ~PoolBucket();
  PoolBucket(const PoolBucket&) = delete;
  PoolBucket& operator=(const PoolBucket&) = delete;

  // A kept request (moved into `out`), or false when none is kept.
  bool Take(PooledRequest* out);
  // Keeps `item` (taking it) unless the bucket is retired or full; false
  // when it did not (the caller still owns it).
  bool Keep(PooledRequest& item);
  size_t size();
  // No more keeping; deletes what was kept.
  void Retire() noexcept;

 private:
  static constexpr size_t kMaxKept = 64;  // async64 keeps 64 in flight
  std::mutex mutex_;
  bool retired_ = false;
  std::vector<PooledRequest> kept_;
};

class RequestPool {
 public:
  explicit RequestPool(bool enabled) : open_(enabled), epoch_(NextEpoch()) {}
  ~RequestPool() { Close(); }
  RequestPool(const RequestPool&) = delete;
  RequestPool& operator=(const RequestPool&) = delete;

  // The bucket of `model` at `version` on `server`, or null when its
  // requests are not to be kept (see the top, or the pool is closed).
  std::shared_ptr<PoolBucket> Bucket(TRITONSERVER_Server* server, const std::string& model,
                                     int64_t version);
  // Deletes every kept request and forgets every bucket (so what is
  // released later is deleted, and a model's config is read again).
  void Flush();
  // Flush, and keep nothing from now on.
  void Close();
  // How many requests are kept, over all buckets.
  size_t kept();

 private:
  struct Version {
    int64_t version;
    std::shared_ptr<PoolBucket> bucket;  // null: not kept for this model
  };
  // Bucket, looked up under the lock.
  std::shared_ptr<PoolBucket> Find(TRITONSERVER_Server* server, const std::string& model,
                                   int64_t version);
  // A number no pool had before, for epoch_.
  static uint64_t NextEpoch();

  std::mutex mutex_;
  bool open_;
  std::unordered_map<std::string, std::vector<Version>> buckets_;
  // Changes (to a number unique in the process) whenever buckets_ is
  // emptied: what a thread remembers of an earlier epoch, or of another
  // pool, it looks up again (Bucket).
  std::atomic<uint64_t> epoch_;
};

}  // namespace tritonpy
