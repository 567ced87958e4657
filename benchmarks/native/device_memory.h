// GPU memory for c_api_bench's gpu16MiB workload, through the CUDA runtime
// the core itself loaded: libtritonserver links the libcudart of its folder,
// so the runtime is in the process before main() runs. It is found among the
// loaded libraries and its entry points taken with dlsym, as the backend
// SDK's <tritonserver/backend/cuda.h> does: nothing of CUDA is needed to
// build the driver, and the device memory it hands the core is the same
// runtime's that the core and the Python API (tritonserver._cuda) use.
//
// The response allocator is the C counterpart of the Python API's default
// GPU allocator (tritonserver._memory.GPUAllocator): each output gets its
// own cudaMalloc on the device asked for, freed with cudaFree on release.
#pragma once

#include <dlfcn.h>
#include <link.h>

#include <triton/tritonserver.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace tritonbench {

// The runtime calls the workload makes (cudaError_t is an int enum, 0 success).
struct CudaRuntime {
  int (*malloc)(void**, size_t) = nullptr;
  int (*free)(void*) = nullptr;
  int (*memcpy)(void*, const void*, size_t, int) = nullptr;
  int (*get_device)(int*) = nullptr;
  int (*set_device)(int) = nullptr;
  int (*device_count)(int*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  std::string problem;  // why the runtime cannot be used, when it cannot

  static constexpr int kMemcpyDefault = 4;  // cudaMemcpyDefault: direction from the pointers

  std::string Error(int status) const {
    return error_string ? error_string(status) : "CUDA error " + std::to_string(status);
  }
};

namespace detail {

inline int FirstCudart(struct dl_phdr_info* info, size_t, void* data) {
  const char* name = info->dlpi_name;
  if (name != nullptr && std::strstr(name, "libcudart") != nullptr) {
    *static_cast<std::string*>(data) = name;
    return 1;
  }
  return 0;
}

template <typename F>
void Take(void* library, const char* name, F* slot, std::string* missing) {
  *slot = reinterpret_cast<F>(dlsym(library, name));
  if (*slot == nullptr) *missing += std::string(missing->empty() ? "" : ", ") + name;
}

}  // namespace detail

// The loaded runtime, looked up once; `problem` is set when it is unusable
// (no libcudart loaded, a missing entry point, or no GPU visible).
inline const CudaRuntime& Cuda() {
  static const CudaRuntime runtime = [] {
    CudaRuntime r;
    std::string path;
    dl_iterate_phdr(detail::FirstCudart, &path);
    void* library = path.empty() ? nullptr : dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (library == nullptr) {
      r.problem = "the core loaded no CUDA runtime (libcudart) into this process";
      return r;
    }
    std::string missing;
    detail::Take(library, "cudaMalloc", &r.malloc, &missing);
    detail::Take(library, "cudaFree", &r.free, &missing);
    detail::Take(library, "cudaMemcpy", &r.memcpy, &missing);
    detail::Take(library, "cudaGetDevice", &r.get_device, &missing);
    detail::Take(library, "cudaSetDevice", &r.set_device, &missing);
    detail::Take(library, "cudaGetDeviceCount", &r.device_count, &missing);
    detail::Take(library, "cudaGetErrorString", &r.error_string, &missing);
    if (!missing.empty()) {
      r.problem = path + " lacks " + missing;
      return r;
    }
    int count = 0;
    const int status = r.device_count(&count);
    if (status != 0) {
      r.problem = "cudaGetDeviceCount failed: " + r.Error(status);
    } else if (count == 0) {
      r.problem = "no GPU is visible";
    }
    return r;
  }();
  return runtime;
}

// Makes `device` current for the scope, then restores the previous one.
class OnDevice {
 public:
  explicit OnDevice(int device) {
    const CudaRuntime& cuda = Cuda();
    if (cuda.get_device(&previous_) != 0) previous_ = -1;
    if (previous_ != device) cuda.set_device(device);
    device_ = device;
  }
  ~OnDevice() {
    if (previous_ >= 0 && previous_ != device_) Cuda().set_device(previous_);
  }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;

 private:
  int previous_ = -1;
  int device_ = 0;
};

inline TRITONSERVER_Error* CudaFailure(const std::string& what, int status) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                               (what + " failed: " + Cuda().Error(status)).c_str());
}

// Each output in device memory of the GPU asked for (GPU 0 when the core
// asks for another kind of memory), as the Python API's GPU allocator.
inline TRITONSERVER_Error* AllocateDevice(TRITONSERVER_ResponseAllocator*, const char*,
                                          size_t byte_size, TRITONSERVER_MemoryType memory_type,
                                          int64_t memory_type_id, void*, void** buffer,
                                          void** buffer_userp,
                                          TRITONSERVER_MemoryType* actual_memory_type,
                                          int64_t* actual_memory_type_id) {
  const int device = memory_type == TRITONSERVER_MEMORY_GPU ? static_cast<int>(memory_type_id) : 0;
  *actual_memory_type = TRITONSERVER_MEMORY_GPU;
  *actual_memory_type_id = device;
  *buffer_userp = nullptr;
  *buffer = nullptr;
  OnDevice on(device);
  const int status = Cuda().malloc(buffer, byte_size == 0 ? 1 : byte_size);
  if (status != 0) {
    *buffer = nullptr;
    return CudaFailure("cudaMalloc of " + std::to_string(byte_size) + " bytes", status);
  }
  return nullptr;
}

inline TRITONSERVER_Error* ReleaseDevice(TRITONSERVER_ResponseAllocator*, void* buffer, void*,
                                         size_t, TRITONSERVER_MemoryType, int64_t memory_type_id) {
  if (buffer == nullptr) return nullptr;
  OnDevice on(static_cast<int>(memory_type_id));
  const int status = Cuda().free(buffer);
  return status == 0 ? nullptr : CudaFailure("cudaFree", status);
}

}  // namespace tritonbench
