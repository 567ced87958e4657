#include "bindings/request_pool.h"

#include "bindings/errors.h"
#include "bindings/message.h"
#include "core_api.h"

namespace tritonpy {
namespace {

// Whether a model of this configuration (the core's JSON) leaves nothing
// behind on its requests (request_pool.h). Any mention of the keys counts:
// a false "no" only costs the reuse.
bool Reusable(const std::string& config) {
  for (const char* key :
       {"\"ensemble_scheduling\"", "\"sequence_batching\"", "\"response_cache\""}) {
    if (config.find(key) != std::string::npos) return false;
  }
  return true;
}

}  // namespace

PoolBucket::~PoolBucket() { Retire(); }

bool PoolBucket::Take(PooledRequest* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (kept_.empty()) return false;
  *out = std::move(kept_.back());
  kept_.pop_back();
  return true;
}

bool PoolBucket::Keep(PooledRequest& item) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (retired_ || kept_.size() >= kMaxKept) return false;
  kept_.push_back(std::move(item));
  item.request = nullptr;
  return true;
}

size_t PoolBucket::size() {
  std::lock_guard<std::mutex> lock(mutex_);
  return kept_.size();
}

void PoolBucket::Retire() noexcept {
  std::vector<PooledRequest> kept;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    retired_ = true;
    kept.swap(kept_);
  }
  // Deleted outside the lock, on a thread that is no backend's (the
  // pool's callers: Python threads and the binding's deleting thread).
  for (PooledRequest& item : kept) {
    ErrorPtr ignored(Core().TRITONSERVER_InferenceRequestDelete(item.request));
  }
}

uint64_t RequestPool::NextEpoch() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

namespace {

// The bucket a thread looked up last, so that a thread sending to one model
// again and again finds it without the pool's lock and a hash of the
// model's name. Valid while its pool is in the same epoch.
struct LastBucket {
  uint64_t epoch = 0;  // 0: none
  std::string model;
  int64_t version = 0;
  std::weak_ptr<PoolBucket> bucket;  // expired: not kept for this model
};

thread_local LastBucket last_bucket;

}  // namespace

std::shared_ptr<PoolBucket> RequestPool::Bucket(TRITONSERVER_Server* server,
                                                const std::string& model, int64_t version) {
  LastBucket& last = last_bucket;
  const uint64_t epoch = epoch_.load(std::memory_order_acquire);
  if (last.epoch == epoch && last.version == version && last.model == model) {
    return last.bucket.lock();
  }
  std::shared_ptr<PoolBucket> bucket = Find(server, model, version);
  last.epoch = epoch;
  last.model = model;
  last.version = version;
  last.bucket = bucket;
  return bucket;
}

std::shared_ptr<PoolBucket> RequestPool::Find(TRITONSERVER_Server* server, const std::string& model,
                                              int64_t version) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!open_) return nullptr;
  auto found = buckets_.find(model);
  if (found != buckets_.end()) {
    for (const Version& v : found->second) {
      if (v.version == version) return v.bucket;
    }
  }
  std::string config;
  try {
    config = MessageJson([&](auto* message) {
      return TRITON_FN(TRITONSERVER_ServerModelConfig)(server, model.c_str(), version, 1, message);
    });
  } catch (const std::exception&) {
    return nullptr;  // no such model (yet): the send itself says what is wrong
  }
  std::shared_ptr<PoolBucket> bucket;
  if (Reusable(config)) bucket = std::make_shared<PoolBucket>();
  buckets_[model].push_back({version, bucket});
  return bucket;
}

void RequestPool::Flush() {
  std::unordered_map<std::string, std::vector<Version>> buckets;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    buckets.swap(buckets_);
    epoch_.store(NextEpoch(), std::memory_order_release);
  }
  for (auto& [model, versions] : buckets) {
    for (Version& v : versions) {
      if (v.bucket != nullptr) v.bucket->Retire();
    }
  }
}

void RequestPool::Close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = false;
  }
  Flush();
}

size_t RequestPool::kept() {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t count = 0;
  for (auto& [model, versions] : buckets_) {
    for (Version& v : versions) {
      if (v.bucket != nullptr) count += v.bucket->size();
    }
  }
  return count;
}

}  // namespace tritonpy
