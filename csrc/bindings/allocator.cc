#include "bindings/allocator.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "bindings/errors.h"
#include "core_api.h"

namespace tritonpy {
namespace {

constexpr size_t kAlignment = 64;

// Called on a core thread for each output of a response (the contract of
// TRITONSERVER_ResponseAllocatorNew in tritonserver.h: start, then alloc per
// output; release when the response is deleted).
TRITONSERVER_Error* AllocHost(TRITONSERVER_ResponseAllocator*, const char*, size_t byte_size,
                              TRITONSERVER_MemoryType, int64_t, void*, void** buffer,
                              void** buffer_userp, TRITONSERVER_MemoryType* actual_memory_type,
                              int64_t* actual_memory_type_id) {
  return GuardCallback([&]() -> TRITONSERVER_Error* {
    *buffer = nullptr;
    *buffer_userp = nullptr;
    // Whatever was asked for, this allocator answers with host memory; the
    // core accepts an allocation of another type and copies if it must.
    *actual_memory_type = TRITONSERVER_MEMORY_CPU;
    *actual_memory_type_id = 0;
    if (byte_size == 0) return nullptr;
    HostBuffer* host = HostBuffer::New(byte_size);
    if (host == nullptr) {
      return MakeError(TRITONSERVER_ERROR_UNAVAILABLE, "out of host memory for an output of " +
                                                           std::to_string(byte_size) + " bytes");
    }
    *buffer = host->data();
    *buffer_userp = static_cast<OutputBuffer*>(host);
    return nullptr;
  });
}

TRITONSERVER_Error* ReleaseHost(TRITONSERVER_ResponseAllocator*, void*, void* buffer_userp, size_t,
                                TRITONSERVER_MemoryType, int64_t) {
  if (buffer_userp != nullptr) static_cast<OutputBuffer*>(buffer_userp)->Unref();
  return nullptr;
}

// Freed large buffers kept for reuse by a request of the same size.
class LargeBufferPool {
 public:
  static constexpr size_t kMinSize = size_t{1} << 20;
  static constexpr size_t kMaxBytes = size_t{256} << 20;
  static constexpr size_t kMaxCount = 8;

  void* Take(size_t size) {
    if (size < kMinSize) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].first == size) {
        void* p = free_[i].second;
        free_[i] = free_.back();
        free_.pop_back();
        held_ -= size;
        return p;
      }
    }
    return nullptr;
  }

  // Keeps `p` if it fits the bounds (evicting the oldest), else frees it.
  void Give(void* p, size_t size) {
    if (size >= kMinSize && size <= kMaxBytes) {
      std::lock_guard<std::mutex> lock(mutex_);
      while (!free_.empty() && (free_.size() >= kMaxCount || held_ + size > kMaxBytes)) {
        std::free(free_.front().second);
        held_ -= free_.front().first;
        free_.erase(free_.begin());
      }
      free_.emplace_back(size, p);
      held_ += size;
      return;
    }
    std::free(p);
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<size_t, void*>> free_;
  size_t held_ = 0;
};

LargeBufferPool& Pool() {
  static auto* pool = new LargeBufferPool();  // lives until exit, by design
  return *pool;
}

// Fresh host memory for `byte_size` (> 0) bytes; null when out of memory.
// From 4 MiB on, it is aligned to 2 MiB and asked to be backed by huge
// pages (numpy does the same for its arrays): where transparent huge pages
// are "madvise", as on most distributions, a backend's copy into a 16 MiB
// output otherwise walks 4096 small pages, each a TLB miss.
void* Allocate(size_t byte_size) {
  constexpr size_t kHugePage = size_t{2} << 20;
  constexpr size_t kHugeFrom = size_t{4} << 20;
  const bool huge = byte_size >= kHugeFrom;
  void* p = nullptr;
  if (posix_memalign(&p, huge ? kHugePage : kAlignment, byte_size) != 0) return nullptr;
#ifdef MADV_HUGEPAGE
  if (huge && p != nullptr) madvise(p, byte_size, MADV_HUGEPAGE);  // advice: failure is harmless
#endif
  return p;
}

}  // namespace

HostBuffer* HostBuffer::New(size_t byte_size) {
  if (byte_size < LargeBufferPool::kMinSize) {
    // The object, then its data at the next multiple of kAlignment (at
    // most kAlignment - 1 bytes on).
    void* block = std::malloc(sizeof(HostBuffer) + kAlignment - 1 + byte_size);
    if (block == nullptr) return nullptr;
    void* data = nullptr;
    if (byte_size > 0) {
      const uintptr_t after = reinterpret_cast<uintptr_t>(block) + sizeof(HostBuffer);
      data = reinterpret_cast<void*>((after + kAlignment - 1) & ~uintptr_t{kAlignment - 1});
    }
    return new (block) HostBuffer(data, byte_size);
  }
  void* p = Pool().Take(byte_size);
  if (p == nullptr && (p = Allocate(byte_size)) == nullptr) return nullptr;
  void* block = std::malloc(sizeof(HostBuffer));
  if (block == nullptr) {
    Pool().Give(p, byte_size);
    return nullptr;
  }
  return new (block) HostBuffer(p, byte_size);
}

HostBuffer::~HostBuffer() {
  if (size_ >= LargeBufferPool::kMinSize) Pool().Give(data_, size_);  // else inside the object
}

TRITONSERVER_ResponseAllocator* DefaultAllocator() {
  static std::once_flag once;
  static TRITONSERVER_ResponseAllocator* allocator = nullptr;
  std::call_once(once, [] {
    Check(TRITON_FN(TRITONSERVER_ResponseAllocatorNew)(&allocator, AllocHost, ReleaseHost,
                                                       /*start_fn=*/nullptr));
  });
  if (allocator == nullptr) {
    throw Error(TRITONSERVER_ERROR_INTERNAL, "the response allocator could not be created");
  }
  return allocator;
}

}  // namespace tritonpy
