// Output memory from a Python MemoryAllocator (InferenceRequest's
// output_memory_allocator). The core calls the allocator on its own threads;
// each call takes the GIL, calls allocate(size, memory_type, memory_type_id)
// (or _allocate_output(name, size, memory_type, memory_type_id) where the
// allocator has it: outputs placed by name)
// and checks the MemoryBuffer it returns. The buffer keeps that MemoryBuffer
// (and so its owner) alive until the core and every Python view let go.
// A failure, including a Python exception, fails that response with the
// error's message; nothing unwinds into the core.
#pragma once

#include <pybind11/pybind11.h>

#include "pyinterop/ref.h"
#include "triton/tritonserver.h"

namespace tritonpy {

class UserAllocator {
 public:
  // `preferred_type` < 0: ask for what the core asks for.
  UserAllocator(pybind11::object allocator, int preferred_type, int64_t preferred_id);
  UserAllocator(const UserAllocator&) = delete;
  UserAllocator& operator=(const UserAllocator&) = delete;

  // The core allocator that calls this object; response_allocator_userp
  // must be the UserAllocator*.
  static TRITONSERVER_ResponseAllocator* CoreAllocator();

 private:
  static TRITONSERVER_Error* Alloc(TRITONSERVER_ResponseAllocator*, const char* name,
                                   size_t byte_size, TRITONSERVER_MemoryType memory_type,
                                   int64_t memory_type_id, void* userp, void** buffer,
                                   void** buffer_userp, TRITONSERVER_MemoryType* actual_type,
                                   int64_t* actual_id);
  pyinterop::OwnedRef allocator_;
  int preferred_type_;
  int64_t preferred_id_;
};

}  // namespace tritonpy
