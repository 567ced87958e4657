// python_floor: the least a Python caller of this core can spend per request.
//
// A CPython extension of two functions, built beside c_api_bench (the
// CMakeLists.txt of this folder) and measured by tsbench/floor_worker.py as
// the system "python-floor":
//
//   bind(server_address, model, /)  the core server of a running
//                                   tritonserver.Server (Server.address())
//   infer(array, /) -> bytes        one request of the array as the model's
//                                   INPUT0 (FP32), sent and waited for
//                                   without the GIL; OUTPUT0's bytes
//
// One call into C per request, the GIL released once around the send and the
// wait, and one object back: the C API driver's request (c_api_bench.cc,
// Send and OnResponse) wrapped in the smallest Python call there can be. It
// is no API (one model, one input, no errors worth the name, the caller keeps
// the input alive): its figures bound what any Python API on this core and
// machine can reach, ours included, since every API does at least this.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <condition_variable>
#include <mutex>
#include <string>

#include <triton/tritonserver.h>

#include "core_calls.h"

namespace {

constexpr const char* kInputName = "INPUT0";
constexpr const char* kOutputName = "OUTPUT0";

TRITONSERVER_Server* g_server = nullptr;
std::string g_model;
TRITONSERVER_ResponseAllocator* g_allocator = nullptr;

void OnRelease(TRITONSERVER_InferenceRequest* request, uint32_t flags, void*) {
  if ((flags & TRITONSERVER_REQUEST_RELEASE_ALL) != 0) {
    TRITONSERVER_ErrorDelete(TRITONSERVER_InferenceRequestDelete(request));
  }
}

// One request's rendezvous, one per thread (a thread has one request in
// flight at a time) and never freed: the callback notifies after unlocking,
// as the C driver's Sink does, so the waiter never wakes only to wait for
// the lock, and may return while notify_one still touches the object.
struct Pending {
  std::mutex mutex;
  std::condition_variable done;
  TRITONSERVER_InferenceResponse* response = nullptr;  // guarded by mutex
  bool final = false;                                  // guarded by mutex
};

Pending& ThreadPending() {
  thread_local Pending* pending = new Pending();
  return *pending;
}

void OnResponse(TRITONSERVER_InferenceResponse* response, uint32_t flags, void* userp) {
  auto* pending = static_cast<Pending*>(userp);
  const bool final = (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  {
    std::lock_guard<std::mutex> lock(pending->mutex);
    if (response != nullptr) {
      if (pending->response != nullptr) {  // the identity model sends one: keep the first
        TRITONSERVER_ErrorDelete(TRITONSERVER_InferenceResponseDelete(response));
      } else {
        pending->response = response;
      }
    }
    pending->final = final;
  }
  if (final) pending->done.notify_one();
}

// Sets a RuntimeError from `err` (taking it); false. True when err is null.
bool Ok(TRITONSERVER_Error* err) {
  if (err == nullptr) return true;
  PyErr_SetString(PyExc_RuntimeError, TRITONSERVER_ErrorMessage(err));
  TRITONSERVER_ErrorDelete(err);
  return false;
}

// Creates and fills the request of `view` (the caller's FP32 input).
TRITONSERVER_Error* NewRequest(const Py_buffer& view, Pending* pending,
                               TRITONSERVER_InferenceRequest** request) {
  TRITONSERVER_Error* err =
      TRITONSERVER_InferenceRequestNew(request, g_server, g_model.c_str(), -1);
  if (err != nullptr) return err;
  const int64_t shape[1] = {static_cast<int64_t>(view.len / sizeof(float))};
  TRITONSERVER_InferenceRequest* r = *request;
  if ((err = TRITONSERVER_InferenceRequestAddInput(r, kInputName, TRITONSERVER_TYPE_FP32, shape,
                                                   1)) == nullptr &&
      (err = TRITONSERVER_InferenceRequestAppendInputData(
           r, kInputName, view.buf, static_cast<size_t>(view.len), TRITONSERVER_MEMORY_CPU, 0)) ==
          nullptr &&
      (err = TRITONSERVER_InferenceRequestAddRequestedOutput(r, kOutputName)) == nullptr &&
      (err = TRITONSERVER_InferenceRequestSetReleaseCallback(r, OnRelease, nullptr)) == nullptr) {
    err = TRITONSERVER_InferenceRequestSetResponseCallback(r, g_allocator, nullptr, OnResponse,
                                                           pending);
  }
  if (err != nullptr) {
    TRITONSERVER_ErrorDelete(TRITONSERVER_InferenceRequestDelete(r));
    *request = nullptr;
  }
  return err;
}

// The output's bytes of a final response (taking it), or null with an error set.
PyObject* OutputBytes(TRITONSERVER_InferenceResponse* response) {
  if (response == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "the final response came without a response");
    return nullptr;
  }
  PyObject* out = nullptr;
  tritonbench::Output output;
  if (Ok(TRITONSERVER_InferenceResponseError(response)) &&
      Ok(tritonbench::ReadOutput(response, 0, &output))) {
    out = PyBytes_FromStringAndSize(static_cast<const char*>(output.base),
                                    static_cast<Py_ssize_t>(output.byte_size));
  }
  TRITONSERVER_ErrorDelete(TRITONSERVER_InferenceResponseDelete(response));
  return out;
}

PyObject* Bind(PyObject*, PyObject* args) {
  unsigned long long address = 0;
  const char* model = nullptr;
  if (!PyArg_ParseTuple(args, "Ks:bind", &address, &model)) return nullptr;
  if (g_allocator == nullptr &&
      !Ok(TRITONSERVER_ResponseAllocatorNew(&g_allocator, tritonbench::AllocateHost,
                                            tritonbench::ReleaseHost, nullptr))) {
    return nullptr;
  }
  g_server = reinterpret_cast<TRITONSERVER_Server*>(static_cast<uintptr_t>(address));
  g_model = model;
  Py_RETURN_NONE;
}

PyObject* Infer(PyObject*, PyObject* array) {
  if (g_server == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "bind() a server first");
    return nullptr;
  }
  Py_buffer view;
  if (PyObject_GetBuffer(array, &view, PyBUF_C_CONTIGUOUS) != 0) return nullptr;
  Pending& pending = ThreadPending();
  pending.response = nullptr;  // no request of this thread is in flight
  pending.final = false;
  TRITONSERVER_InferenceRequest* request = nullptr;
  TRITONSERVER_Error* err = NewRequest(view, &pending, &request);
  if (err == nullptr) {
    Py_BEGIN_ALLOW_THREADS;
    err = TRITONSERVER_ServerInferAsync(g_server, request, nullptr);
    if (err == nullptr) {
      std::unique_lock<std::mutex> lock(pending.mutex);
      pending.done.wait(lock, [&] { return pending.final; });
    } else {
      TRITONSERVER_ErrorDelete(TRITONSERVER_InferenceRequestDelete(request));
    }
    Py_END_ALLOW_THREADS;
  }
  PyBuffer_Release(&view);  // the caller keeps the array alive (see the top)
  if (!Ok(err)) return nullptr;
  return OutputBytes(pending.response);
}

PyMethodDef methods[] = {
    {"bind", Bind, METH_VARARGS, "bind(server_address, model, /): the server and model to use."},
    {"infer", Infer, METH_O, "infer(array, /) -> bytes: one inference of INPUT0; OUTPUT0."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT,
                      "python_floor",
                      "The least a Python caller of the core spends per request.",
                      -1,
                      methods,
                      nullptr,
                      nullptr,
                      nullptr,
                      nullptr};

}  // namespace

PyMODINIT_FUNC PyInit_python_floor() { return PyModule_Create(&module); }
