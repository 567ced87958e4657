// silent (reliability test backend, raw TRITONBACKEND API, no SDK): releases
// every request without sending any response, the way a buggy backend
// would. What the client sees is up to the core and the binding: it must be
// an error, never a wait without end.
#include <triton/tritonbackend.h>

extern "C" {

TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance*, TRITONBACKEND_Request** requests, const uint32_t request_count) {
  for (uint32_t i = 0; i < request_count; ++i) {
    TRITONSERVER_Error* error =
        TRITONBACKEND_RequestRelease(requests[i], TRITONSERVER_REQUEST_RELEASE_ALL);
    if (error != nullptr) TRITONSERVER_ErrorDelete(error);
  }
  return nullptr;  // the requests are released: nothing is left to the core
}

}  // extern "C"
