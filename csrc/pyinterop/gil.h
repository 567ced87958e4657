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

// Gives the calling thread a Python thread state of its own if it has none
// (a thread Python did not start), kept until the thread exits. Without it,
// every PyGILState_Ensure on such a thread would make a thread state and the
// matching release would free it: an allocation per call, and on CPython
// before 3.12.9 and 3.13.2 a crash when that allocation meets
// tracemalloc.stop() on another thread (CPython issue gh-128679). Kept, a
// thread allocates once, at its first use of the GIL. Needs Python alive.
inline void KeepThreadState() noexcept {
  if (PyGILState_GetThisThreadState() != nullptr) return;  // Python's thread, or kept already
  struct Kept {
    PyThreadState* state;
    Kept() noexcept {
      PyGILState_Ensure();          // makes the thread state (and takes the GIL)
      state = PyEval_SaveThread();  // the GIL goes; the thread state stays
    }
    ~Kept() {                      // at the thread's exit
      if (!PythonAlive()) return;  // finalization frees every thread state itself
      PyEval_RestoreThread(state);
      PyThreadState_Clear(state);
      PyThreadState_DeleteCurrent();
    }
  };
  thread_local Kept kept;
  (void)kept;
}

// Holds the GIL for its scope, from any thread, if Python is alive; held()
// says whether it did. A thread Python did not start keeps the thread state
// it gets (KeepThreadState).
class AcquireGil {
 public:
  AcquireGil() noexcept : held_(PythonAlive()) {
    if (!held_) return;
    KeepThreadState();
    state_ = PyGILState_Ensure();
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

}  // namespace pyinterop
