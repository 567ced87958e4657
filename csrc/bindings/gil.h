// Taking the GIL from threads the core owns.
#pragma once

#include <Python.h>

namespace tritonpy {

// True while Python can still run code: false during and after finalization,
// when a foreign thread must not try to take the GIL (it would hang).
inline bool PythonAlive() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

// Holds the GIL for its scope, from any thread, if Python is alive.
class GilFromAnyThread {
 public:
  GilFromAnyThread() : held_(PythonAlive()) {
    if (held_) state_ = PyGILState_Ensure();
  }
  ~GilFromAnyThread() {
    if (held_) PyGILState_Release(state_);
  }
  GilFromAnyThread(const GilFromAnyThread&) = delete;
  GilFromAnyThread& operator=(const GilFromAnyThread&) = delete;
  bool held() const { return held_; }

 private:
  bool held_;
  PyGILState_STATE state_{};
};

// Releases the GIL for its scope when the calling thread holds it (a
// destructor may run with or without it).
class GilReleaseIfHeld {
 public:
  GilReleaseIfHeld() {
    if (Py_IsInitialized() && PyGILState_Check()) save_ = PyEval_SaveThread();
  }
  ~GilReleaseIfHeld() {
    if (save_ != nullptr) PyEval_RestoreThread(save_);
  }
  GilReleaseIfHeld(const GilReleaseIfHeld&) = delete;
  GilReleaseIfHeld& operator=(const GilReleaseIfHeld&) = delete;

 private:
  PyThreadState* save_ = nullptr;
};

}  // namespace tritonpy
