// The response allocator: where the core puts output tensors.
//
// The default allocator hands out 64-byte aligned host memory and never
// touches Python, so it runs on the core's threads without the GIL. Each
// buffer is reference counted: the core holds one reference until it
// releases the buffer (when the response is deleted), and every Python
// object that views the buffer holds another. So a response can be deleted
// as soon as it has been read, while its tensors live on in Python.
//
// Large buffers (1 MiB and up) are recycled through a small pool, bounded in
// count and bytes: a fresh large allocation is fresh pages, and faulting in
// 16 MiB of them costs more than copying 16 MiB.
#pragma once

#include <atomic>
#include <cstddef>

#include "triton/tritonserver.h"

namespace tritonpy {

class HostBuffer {
 public:
  // One reference, owned by the caller. Null data for a zero-size buffer.
  static HostBuffer* New(size_t byte_size);
  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref();
  void* data() const { return data_; }

 private:
  HostBuffer(void* data, size_t size) : data_(data), size_(size) {}
  ~HostBuffer();
  void* data_;
  size_t size_;
  std::atomic<int> refs_{1};
};

// The process-wide default allocator, created on first use. Its buffers'
// buffer_userp is the HostBuffer*.
TRITONSERVER_ResponseAllocator* DefaultAllocator();

}  // namespace tritonpy
