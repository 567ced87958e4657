#include "bindings/allocator.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <string>

#include "bindings/errors.h"
#include "core_api.h"

namespace tritonpy {
namespace {

constexpr size_t kAlignment = 64;

// Called on a core thread for each output of a response (contract: seed 000,
// order start -> alloc per output; release when the response is deleted).
TRITONSERVER_Error* AllocHost(TRITONSERVER_ResponseAllocator*, const char*,
                              size_t byte_size, TRITONSERVER_MemoryType,
                              int64_t, void*, void** buffer,
                              void** buffer_userp,
                              TRITONSERVER_MemoryType* actual_memory_type,
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
      return MakeError(TRITONSERVER_ERROR_UNAVAILABLE,
                       "out of host memory for an output of " +
                           std::to_string(byte_size) + " bytes");
    }
    *buffer = host->data();
    *buffer_userp = host;
    return nullptr;
  });
}

TRITONSERVER_Error* ReleaseHost(TRITONSERVER_ResponseAllocator*, void*,
                                void* buffer_userp, size_t,
                                TRITONSERVER_MemoryType, int64_t) {
  if (buffer_userp != nullptr) static_cast<HostBuffer*>(buffer_userp)->Unref();
  return nullptr;
}

}  // namespace

HostBuffer* HostBuffer::New(size_t byte_size) {
  void* p = nullptr;
  if (byte_size > 0 && (posix_memalign(&p, kAlignment, byte_size) != 0 || p == nullptr)) {
    return nullptr;
  }
  HostBuffer* host = new (std::nothrow) HostBuffer(p);
  if (host == nullptr) std::free(p);
  return host;
}

void HostBuffer::Unref() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
}

HostBuffer::~HostBuffer() { std::free(data_); }

TRITONSERVER_ResponseAllocator* DefaultAllocator() {
  static std::once_flag once;
  static TRITONSERVER_ResponseAllocator* allocator = nullptr;
  std::call_once(once, [] {
    Check(TRITON_FN(TRITONSERVER_ResponseAllocatorNew)(
        &allocator, AllocHost, ReleaseHost, /*start_fn=*/nullptr));
  });
  if (allocator == nullptr) {
    throw TritonError(TRITONSERVER_ERROR_INTERNAL,
                      "the response allocator could not be created");
  }
  return allocator;
}

}  // namespace tritonpy
