// Copies between host and GPU memory for backends, without a CUDA toolkit.
//
// A tensor's buffers may be in GPU memory: inputs a client sent from a
// device, outputs the client's allocator placed on one. CopyMemory moves
// bytes between any two of host, pinned and device memory through the CUDA
// runtime the core itself loaded (found among the process's libraries at
// the first copy that needs it, else libcudart.so.12 by name). A backend
// built with this SDK therefore needs no CUDA headers or libraries, and on a
// machine without a GPU a host-to-host copy is a memcpy and nothing of CUDA
// is touched.
#pragma once

#include <dlfcn.h>
#include <link.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>

#include "tritonserver/backend/error.h"

namespace tritonserver::backend {

inline bool IsHostMemory(TRITONSERVER_MemoryType type) {
  return type == TRITONSERVER_MEMORY_CPU || type == TRITONSERVER_MEMORY_CPU_PINNED;
}

namespace detail {

// The few runtime entry points a copy needs (cudaError_t is an int enum).
struct CudaRuntime {
  using Memcpy = int (*)(void*, const void*, size_t, int);
  using GetDevice = int (*)(int*);
  using SetDevice = int (*)(int);
  using ErrorString = const char* (*)(int);
  Memcpy memcpy = nullptr;
  GetDevice get_device = nullptr;
  SetDevice set_device = nullptr;
  ErrorString error_string = nullptr;
  std::string problem;  // why there is none, when there is none
};

// dl_iterate_phdr's callback: the path of the first loaded libcudart.
inline int FindLoadedCudart(struct dl_phdr_info* info, size_t, void* data) {
  const char* name = info->dlpi_name;
  if (name != nullptr && std::strstr(name, "libcudart") != nullptr) {
    *static_cast<std::string*>(data) = name;
    return 1;
  }
  return 0;
}

inline const CudaRuntime& Cuda() {
  static CudaRuntime runtime;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string loaded;
    dl_iterate_phdr(FindLoadedCudart, &loaded);
    void* library = nullptr;
    if (!loaded.empty()) library = dlopen(loaded.c_str(), RTLD_NOW | RTLD_NOLOAD);
    for (const char* name : {"libcudart.so.12", "libcudart.so"}) {
      if (library == nullptr) library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    }
    if (library == nullptr) {
      runtime.problem = "no CUDA runtime is loaded in this process or found as libcudart.so.12";
      return;
    }
    runtime.memcpy = reinterpret_cast<CudaRuntime::Memcpy>(dlsym(library, "cudaMemcpy"));
    runtime.get_device = reinterpret_cast<CudaRuntime::GetDevice>(dlsym(library, "cudaGetDevice"));
    runtime.set_device = reinterpret_cast<CudaRuntime::SetDevice>(dlsym(library, "cudaSetDevice"));
    runtime.error_string =
        reinterpret_cast<CudaRuntime::ErrorString>(dlsym(library, "cudaGetErrorString"));
    if (runtime.memcpy == nullptr || runtime.get_device == nullptr ||
        runtime.set_device == nullptr || runtime.error_string == nullptr) {
      runtime.memcpy = nullptr;
      runtime.problem = "the CUDA runtime found lacks cudaMemcpy, cudaGetDevice or cudaSetDevice";
    }
  });
  return runtime;
}

}  // namespace detail

// Copies `byte_size` bytes from `src` (in `src_type` memory, on device
// `src_id` for GPU memory) to `dst`; returns when the copy is done. Throws
// Error (UNAVAILABLE) when a GPU side cannot be reached.
inline void CopyMemory(void* dst, TRITONSERVER_MemoryType dst_type, int64_t dst_id, const void* src,
                       TRITONSERVER_MemoryType src_type, int64_t src_id, size_t byte_size) {
  if (byte_size == 0) return;
  if (IsHostMemory(dst_type) && IsHostMemory(src_type)) {
    std::memcpy(dst, src, byte_size);
    return;
  }
  const detail::CudaRuntime& cuda = detail::Cuda();
  if (cuda.memcpy == nullptr) {
    throw Error(TRITONSERVER_ERROR_UNAVAILABLE,
                "copying " + std::to_string(byte_size) + " bytes of " +
                    TRITONSERVER_MemoryTypeString(src_type) + " memory to " +
                    TRITONSERVER_MemoryTypeString(dst_type) + " memory: " + cuda.problem);
  }
  // The copy runs on the GPU side's device (the destination's when both are).
  const int device = static_cast<int>(dst_type == TRITONSERVER_MEMORY_GPU ? dst_id : src_id);
  int previous = -1;
  if (cuda.get_device(&previous) != 0) previous = -1;
  if (previous != device) cuda.set_device(device);
  constexpr int kMemcpyDefault = 4;  // cudaMemcpyDefault: direction from the pointers
  const int status = cuda.memcpy(dst, src, byte_size, kMemcpyDefault);
  if (previous >= 0 && previous != device) cuda.set_device(previous);
  if (status != 0) {
    throw Error(TRITONSERVER_ERROR_UNAVAILABLE,
                "cudaMemcpy of " + std::to_string(byte_size) + " bytes from " +
                    TRITONSERVER_MemoryTypeString(src_type) + " to " +
                    TRITONSERVER_MemoryTypeString(dst_type) +
                    " memory failed: " + cuda.error_string(status));
  }
}

}  // namespace tritonserver::backend
