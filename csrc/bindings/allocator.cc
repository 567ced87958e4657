#include "bindings/allocator.h"

#include <cstdlib>
#include <mutex>

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
    void* p = nullptr;
    if (posix_memalign(&p, kAlignment, byte_size) != 0 || p == nullptr) {
      return MakeError(TRITONSERVER_ERROR_UNAVAILABLE,
                       "out of host memory for an output of " +
                           std::to_string(byte_size) + " bytes");
    }
    *buffer = p;
    return nullptr;
  });
}

TRITONSERVER_Error* ReleaseHost(TRITONSERVER_ResponseAllocator*, void* buffer,
                                void*, size_t, TRITONSERVER_MemoryType,
                                int64_t) {
  std::free(buffer);
  return nullptr;
}

}  // namespace

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
