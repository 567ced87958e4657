// The GIL, for code that runs on threads Python did not start (the core's)
// as well as on Python's own. Used by the binding and by the inprocess
// backend alike.
#pragma once

#include <Python.h>

namespace pyinterop {

// True while Python can run code: false during and after finalization, when
// a foreign thread must not try to take the GIL (it would hang).
inline bool PythonAlive() noexcept {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

// Holds the GIL for its scope, from any thread, if Python is alive; held()
// says whether it did.
class AcquireGil {
 public:
  AcquireGil() noexcept : held_(PythonAlive()) {
    if (held_) state_ = PyGILState_Ensure();
  }
  ~AcquireGil() {
    if (held_) PyGILState_Release(state_);
  }
  AcquireGil(const AcquireGil&) = delete;
  AcquireGil& operator=(const AcquireGil&) = delete;
  bool held() const { return held_; }

 private:
  bool held_;
  PyGILState_STATE state_{};
};

// Releases the GIL for its scope when the calling thread holds it (for code
// that may run with or without it, such as a destructor).
class ReleaseGil {
 public:
  ReleaseGil() noexcept {
    if (Py_IsInitialized() && PyGILState_Check()) save_ = PyEval_SaveThread();
  }
  ~ReleaseGil() {
    if (save_ != nullptr) PyEval_RestoreThread(save_);
  }
  ReleaseGil(const ReleaseGil&) = delete;
  ReleaseGil& operator=(const ReleaseGil&) = delete;

 private:
  PyThreadState* save_ = nullptr;
};

// The GIL for a foreign thread that calls into Python again and again (a
// model instance's thread): its thread state is made on the first use and
// kept for the thread's life, instead of made and freed per call, which also
// keeps its threading.local data. The caller checks PythonAlive() first.
class ThreadGil {
 public:
  ThreadGil() {
    thread_local bool primed = false;
    if (!primed) {
      PyGILState_Ensure();  // never released: keeps the thread state
      PyEval_SaveThread();
      primed = true;
    }
    state_ = PyGILState_Ensure();
  }
  ~ThreadGil() { PyGILState_Release(state_); }
  ThreadGil(const ThreadGil&) = delete;
  ThreadGil& operator=(const ThreadGil&) = delete;

 private:
  PyGILState_STATE state_;
};

}  // namespace pyinterop
