// What c_api_bench and python_floor ask of the core the same way: the
// response allocator (every output in plain host memory, malloc and free)
// and reading a response's output.
#pragma once

#include <triton/tritonserver.h>

#include <cstdlib>

namespace tritonbench {

inline TRITONSERVER_Error* AllocateHost(TRITONSERVER_ResponseAllocator*, const char*,
                                        size_t byte_size, TRITONSERVER_MemoryType, int64_t, void*,
                                        void** buffer, void** buffer_userp,
                                        TRITONSERVER_MemoryType* actual_memory_type,
                                        int64_t* actual_memory_type_id) {
  *actual_memory_type = TRITONSERVER_MEMORY_CPU;
  *actual_memory_type_id = 0;
  *buffer_userp = nullptr;
  *buffer = nullptr;
  if (byte_size == 0) return nullptr;
  *buffer = std::malloc(byte_size);
  if (*buffer == nullptr) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of host memory for an output");
  }
  return nullptr;
}

inline TRITONSERVER_Error* ReleaseHost(TRITONSERVER_ResponseAllocator*, void* buffer, void*, size_t,
                                       TRITONSERVER_MemoryType, int64_t) {
  std::free(buffer);
  return nullptr;
}

// One output of a response, as TRITONSERVER_InferenceResponseOutput gives it.
struct Output {
  const char* name = nullptr;
  TRITONSERVER_DataType datatype = TRITONSERVER_TYPE_INVALID;
  const int64_t* shape = nullptr;
  uint64_t dim_count = 0;
  const void* base = nullptr;
  size_t byte_size = 0;
  TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
  int64_t memory_type_id = 0;
  void* buffer_userp = nullptr;
};

inline TRITONSERVER_Error* ReadOutput(TRITONSERVER_InferenceResponse* response, uint32_t index,
                                      Output* o) {
  return TRITONSERVER_InferenceResponseOutput(
      response, index, &o->name, &o->datatype, &o->shape, &o->dim_count, &o->base, &o->byte_size,
      &o->memory_type, &o->memory_type_id, &o->buffer_userp);
}

}  // namespace tritonbench
