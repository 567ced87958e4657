// Output memory. Every output buffer the core gets from us is an
// OutputBuffer, and the allocator's buffer_userp points at it. It is
// reference counted: the core holds one reference until it releases the
// buffer (when the response is deleted), and every Python object that views
// the buffer holds another. So a response can be deleted as soon as it has
// been read, while its tensors live on in Python.
//
// HostBuffer is the default: 64-byte aligned host memory, never touching
// Python, so it runs on the core's threads without the GIL. Large buffers
// (1 MiB and up) are recycled through a small pool, bounded in count and
// bytes: a fresh large allocation is fresh pages, and faulting in 16 MiB of
// them costs more than copying 16 MiB. A smaller buffer shares one plain
// malloc with its HostBuffer (aligned inside it): an aligned allocation
// (posix_memalign) leaves a small free fragment before its chunk, and these
// pile up in the malloc arena of the core's thread that allocates outputs
// while the reader's thread frees them (benchmarks/README.md, "One
// allocation per small output").
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>

#include "triton/tritonserver.h"

namespace tritonpy {

class OutputBuffer {
 public:
  void Ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Unref() {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 protected:
  OutputBuffer() = default;
  virtual ~OutputBuffer() = default;

 private:
  std::atomic<int> refs_{1};  // the creator's
};

class HostBuffer final : public OutputBuffer {
 public:
  // One reference, owned by the caller; null when out of memory. Null data
  // for a zero-size buffer.
  static HostBuffer* New(size_t byte_size);
  void* data() const { return data_; }

  // Every HostBuffer lives in memory from std::malloc (New), alone or
  // followed by its data.
  static void operator delete(void* p) { std::free(p); }

 private:
  HostBuffer(void* data, size_t size) : data_(data), size_(size) {}
  ~HostBuffer() override;
  void* data_;  // under 1 MiB: inside this object's allocation, after it
  size_t size_;
};

// The process-wide default allocator, created on first use.
TRITONSERVER_ResponseAllocator* DefaultAllocator();

}  // namespace tritonpy
