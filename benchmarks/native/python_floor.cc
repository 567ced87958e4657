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
// and, for many requests in flight on an event loop (async64), slots:
//
//   slots() -> int                  an eventfd, readable once some response
//                                   arrived for a slot that asked to be woken
//   send(slot, array, /)            sends the request of slot (0-63) without
//                                   waiting (the GIL released around the send)
//   take(slot, /) -> bytes | None   OUTPUT0's bytes once its final response came
//   arm(slot, /) -> bool            False when the response is there already;
//                                   else the slot is reported by woken()
//   woken() -> list[int]            the slots woken since the last call
//
// One call into C per request, the GIL released once around the send and the
// wait, and one object back: the C API driver's request (c_api_bench.cc,
// Send and OnResponse) wrapped in the smallest Python call there can be. It
// is no API (one model, one input, no errors worth the name, the caller keeps
// the input alive): its figures bound what any Python API on this core and
// machine can reach, ours included, since every API does at least this.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <sys/eventfd.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

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
TRITONSERVER_Error* NewRequest(const Py_buffer& view,
                               TRITONSERVER_InferenceResponseCompleteFn_t on_response, void* userp,
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
    err = TRITONSERVER_InferenceRequestSetResponseCallback(r, g_allocator, nullptr, on_response,
                                                           userp);
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
  TRITONSERVER_Error* err = NewRequest(view, OnResponse, &pending, &request);
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

// ---- Slots: requests in flight on an event loop ----------------------------

constexpr int kSlots = 64;

// One request in flight at a time per slot. Never freed (see Pending).
struct Slot {
  std::mutex mutex;
  TRITONSERVER_InferenceResponse* response = nullptr;  // guarded by mutex
  bool final = false;                                  // guarded by mutex
  bool armed = false;                                  // guarded by mutex
};
Slot g_slots[kSlots];

// Slots woken since woken() last ran; the eventfd is written when the first
// one is added, so a loop wakes once however many arrive meanwhile.
std::mutex g_woken_mutex;
std::vector<int> g_woken;  // guarded by g_woken_mutex
int g_eventfd = -1;

void OnSlotResponse(TRITONSERVER_InferenceResponse* response, uint32_t flags, void* userp) {
  auto* slot = static_cast<Slot*>(userp);
  const bool final = (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(slot->mutex);
    if (response != nullptr) {
      if (slot->response != nullptr) {
        TRITONSERVER_ErrorDelete(TRITONSERVER_InferenceResponseDelete(response));
      } else {
        slot->response = response;
      }
    }
    if (final) {
      slot->final = true;
      wake = slot->armed;
      slot->armed = false;
    }
  }
  if (!wake) return;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(g_woken_mutex);
    first = g_woken.empty();
    g_woken.push_back(static_cast<int>(slot - g_slots));
  }
  if (first) {
    const uint64_t one = 1;
    (void)!write(g_eventfd, &one, sizeof(one));
  }
}

// The slot of a Python int, or null with an error set.
Slot* SlotOf(PyObject* index) {
  const long i = PyLong_AsLong(index);
  if (i == -1 && PyErr_Occurred()) return nullptr;
  if (i < 0 || i >= kSlots) {
    PyErr_SetString(PyExc_IndexError, "slot out of range");
    return nullptr;
  }
  return &g_slots[i];
}

PyObject* Slots(PyObject*, PyObject*) {
  if (g_eventfd < 0 && (g_eventfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
    return PyErr_SetFromErrno(PyExc_OSError);
  }
  return PyLong_FromLong(g_eventfd);
}

PyObject* Send(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "send(slot, array, /)");
    return nullptr;
  }
  if (g_server == nullptr || g_eventfd < 0) {
    PyErr_SetString(PyExc_RuntimeError, "bind() a server and open slots() first");
    return nullptr;
  }
  Slot* slot = SlotOf(args[0]);
  if (slot == nullptr) return nullptr;
  Py_buffer view;
  if (PyObject_GetBuffer(args[1], &view, PyBUF_C_CONTIGUOUS) != 0) return nullptr;
  {
    std::lock_guard<std::mutex> lock(slot->mutex);  // the slot's last request is done
    slot->response = nullptr;
    slot->final = false;
    slot->armed = false;
  }
  TRITONSERVER_InferenceRequest* request = nullptr;
  TRITONSERVER_Error* err = NewRequest(view, OnSlotResponse, slot, &request);
  if (err == nullptr) {
    Py_BEGIN_ALLOW_THREADS;
    err = TRITONSERVER_ServerInferAsync(g_server, request, nullptr);
    if (err != nullptr) TRITONSERVER_ErrorDelete(TRITONSERVER_InferenceRequestDelete(request));
    Py_END_ALLOW_THREADS;
  }
  PyBuffer_Release(&view);  // the caller keeps the array alive (see the top)
  if (!Ok(err)) return nullptr;
  Py_RETURN_NONE;
}

PyObject* Take(PyObject*, PyObject* index) {
  Slot* slot = SlotOf(index);
  if (slot == nullptr) return nullptr;
  TRITONSERVER_InferenceResponse* response = nullptr;
  {
    std::lock_guard<std::mutex> lock(slot->mutex);
    if (!slot->final) Py_RETURN_NONE;
    response = slot->response;
    slot->response = nullptr;
  }
  return OutputBytes(response);
}

PyObject* Arm(PyObject*, PyObject* index) {
  Slot* slot = SlotOf(index);
  if (slot == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(slot->mutex);
  if (slot->final) Py_RETURN_FALSE;
  slot->armed = true;
  Py_RETURN_TRUE;
}

PyObject* Woken(PyObject*, PyObject*) {
  uint64_t count = 0;
  (void)!read(g_eventfd, &count, sizeof(count));  // nonblocking: clears it
  std::vector<int> woken;
  {
    std::lock_guard<std::mutex> lock(g_woken_mutex);
    woken.swap(g_woken);
  }
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(woken.size()));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < woken.size(); ++i) {
    PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), PyLong_FromLong(woken[i]));
  }
  return list;
}

PyMethodDef methods[] = {
    {"bind", Bind, METH_VARARGS, "bind(server_address, model, /): the server and model to use."},
    {"infer", Infer, METH_O, "infer(array, /) -> bytes: one inference of INPUT0; OUTPUT0."},
    {"slots", Slots, METH_NOARGS, "slots() -> int: the eventfd that woken slots are told on."},
    {"send", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(Send)), METH_FASTCALL,
     "send(slot, array, /): sends the slot's request of INPUT0, not waiting."},
    {"take", Take, METH_O,
     "take(slot, /) -> bytes | None: OUTPUT0 once the slot's request is done."},
    {"arm", Arm, METH_O, "arm(slot, /) -> bool: False if done already, else woken() will say."},
    {"woken", Woken, METH_NOARGS, "woken() -> list[int]: the slots woken since the last call."},
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
