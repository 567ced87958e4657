// The Python objects the backend hands to tritonserver._inprocess:
//
//  - RequestHandle: one request of a batch. Python reads its inputs and
//    metadata and answers it through it (send, fail, finish). The request
//    is released when the handle is garbage: after Execute for an ordinary
//    request, later when Python kept it (a decoupled response sender, an
//    input array kept past Execute). A handle that dies without a final
//    response fails its request first.
//  - InputBuffer: one input's data, zero copy (the buffer protocol, read
//    only); it keeps its handle, so the data stays valid while any numpy
//    array over it lives.
//
// Locking: every core call that can run a callback (sending, releasing) is
// made without the GIL; the per-handle mutex is only ever taken without the
// GIL, so a callback that takes the GIL never waits on a thread that holds
// the GIL and waits on the mutex.
#pragma once

#include "runtime.h"

namespace inprocess {

PyObject* MakeHandleType();
PyObject* MakeInputBufferType();

// A new RequestHandle owning `request` (it releases it); null with a Python
// error set on failure (the request is then still the caller's).
PyObject* NewHandle(TRITONBACKEND_Request* request, tb::Instance& instance,
                    uint64_t exec_start, uint64_t compute_start);

// For Execute, with the GIL: whether the request got its final response,
// and failing it (the GIL is released inside).
bool HandleFinished(PyObject* handle);
bool HandleFailed(PyObject* handle);
uint64_t HandleBatchSize(PyObject* handle);
void HandleFail(PyObject* handle, TRITONSERVER_Error_Code code,
                const std::string& message);

}  // namespace inprocess
