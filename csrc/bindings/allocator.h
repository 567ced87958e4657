// The response allocator: where the core puts output tensors.
//
// The default allocator hands out 64-byte aligned host memory and never
// touches Python, so it runs on the core's threads without the GIL. The
// buffer lives until the response that holds it is deleted (release_fn).
#pragma once

#include "triton/tritonserver.h"

namespace tritonpy {

// The process-wide default allocator, created on first use.
TRITONSERVER_ResponseAllocator* DefaultAllocator();

}  // namespace tritonpy
