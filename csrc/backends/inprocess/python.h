// Small helpers for calling into the running interpreter from core threads.
//
// The backend is only ever loaded into a Python process (by the tritonserver
// package): its Py* symbols resolve against that process's interpreter, and
// it is never linked to libpython.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <tritonserver/backend.h>

#include <string>
#include <utility>

namespace inprocess {

namespace tb = tritonserver::backend;

// Whether Python can be entered: initialized and not shutting down (a thread
// that takes the GIL during finalization would hang).
inline bool PythonAlive() noexcept {
  if (!Py_IsInitialized()) return false;
#if PY_VERSION_HEX >= 0x030D0000
  return !Py_IsFinalizing();
#else
  return !_Py_IsFinalizing();
#endif
}

// Holds the GIL for its lifetime (any thread, created by the core or not).
class Gil {
 public:
  Gil() : state_(PyGILState_Ensure()) {}
  ~Gil() { PyGILState_Release(state_); }
  Gil(const Gil&) = delete;
  Gil& operator=(const Gil&) = delete;

 private:
  PyGILState_STATE state_;
};

// Gil for a thread that calls into Python again and again (a model
// instance's core thread): its thread state is made once and kept (one per
// thread, for the process's lifetime) instead of made and freed per call,
// which also keeps its threading.local data.
class InstanceGil {
 public:
  InstanceGil() {
    thread_local bool primed = false;
    if (!primed) {
      PyGILState_Ensure();  // never released: keeps the thread state alive
      PyEval_SaveThread();
      primed = true;
    }
    state_ = PyGILState_Ensure();
  }
  ~InstanceGil() { PyGILState_Release(state_); }
  InstanceGil(const InstanceGil&) = delete;
  InstanceGil& operator=(const InstanceGil&) = delete;

 private:
  PyGILState_STATE state_;
};

// Releases the GIL for its lifetime (the thread must hold it).
class NoGil {
 public:
  NoGil() : save_(PyEval_SaveThread()) {}
  ~NoGil() { PyEval_RestoreThread(save_); }
  NoGil(const NoGil&) = delete;
  NoGil& operator=(const NoGil&) = delete;

 private:
  PyThreadState* save_;
};

// An owned reference. Destroy (or reset) it only while holding the GIL.
class Ref {
 public:
  Ref() = default;
  explicit Ref(PyObject* owned) : ptr_(owned) {}
  Ref(Ref&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  Ref& operator=(Ref&& other) noexcept {
    if (this != &other) {
      Py_XDECREF(ptr_);
      ptr_ = std::exchange(other.ptr_, nullptr);
    }
    return *this;
  }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() { Py_XDECREF(ptr_); }

  static Ref Borrow(PyObject* borrowed) {
    Py_XINCREF(borrowed);
    return Ref(borrowed);
  }
  PyObject* get() const { return ptr_; }
  PyObject* release() { return std::exchange(ptr_, nullptr); }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  PyObject* ptr_ = nullptr;
};

// A Python object kept by core-owned state (model and instance state slots):
// dropped under the GIL, or leaked when Python is already gone.
class Kept {
 public:
  explicit Kept(PyObject* owned) : ptr_(owned) {}
  Kept(const Kept&) = delete;
  Kept& operator=(const Kept&) = delete;
  ~Kept() {
    if (ptr_ != nullptr && PythonAlive()) {
      Gil gil;
      Py_DECREF(ptr_);
    }
  }
  PyObject* get() const { return ptr_; }

 private:
  PyObject* ptr_;
};

// The pending Python exception as a backend error (clears it). `describe`
// is tritonserver._inprocess._dispatch.describe_error: (code, message).
inline tb::Error FetchError(PyObject* describe) {
  PyObject* type = nullptr;
  PyObject* value = nullptr;
  PyObject* traceback = nullptr;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  Ref owned_type(type), owned_value(value), owned_tb(traceback);
  if (value == nullptr) {
    return tb::Error::Internal("unknown Python error");
  }
  if (traceback != nullptr) PyException_SetTraceback(value, traceback);
  if (describe != nullptr) {
    Ref pair(PyObject_CallOneArg(describe, value));
    int code = 0;
    const char* message = nullptr;
    if (pair && PyArg_ParseTuple(pair.get(), "is", &code, &message)) {
      return tb::Error(static_cast<TRITONSERVER_Error_Code>(code), message);
    }
    PyErr_Clear();
  }
  Ref text(PyObject_Str(value));
  const char* message = text ? PyUnicode_AsUTF8(text.get()) : nullptr;
  if (message == nullptr) PyErr_Clear();
  return tb::Error::Internal(message ? message : "unprintable Python error");
}

}  // namespace inprocess
