// A strong reference to a Python object held by C++ state that may be
// destroyed on any thread (a core thread running a release callback, a
// backend finalizing a model): it is dropped with the GIL held, or leaked
// on purpose once the interpreter is shutting down (taking the GIL then
// would hang, and the object dies with the process anyway).
#pragma once

#include <pybind11/pybind11.h>

#include <utility>

#include "pyinterop/gil.h"

namespace pyinterop {

class OwnedRef {
 public:
  OwnedRef() = default;
  // Takes the caller's reference (with the GIL held).
  explicit OwnedRef(pybind11::object object) : ptr_(object.release().ptr()) {}
  static OwnedRef Steal(PyObject* owned) {
    OwnedRef ref;
    ref.ptr_ = owned;
    return ref;
  }
  OwnedRef(OwnedRef&& other) noexcept : ptr_(std::exchange(other.ptr_, nullptr)) {}
  OwnedRef& operator=(OwnedRef&& other) noexcept {
    if (this != &other) {
      Reset();
      ptr_ = std::exchange(other.ptr_, nullptr);
    }
    return *this;
  }
  OwnedRef(const OwnedRef&) = delete;
  OwnedRef& operator=(const OwnedRef&) = delete;
  ~OwnedRef() { Reset(); }

  // Drops the reference (any thread, with or without the GIL).
  void Reset() noexcept {
    PyObject* object = std::exchange(ptr_, nullptr);
    if (object == nullptr) return;
    if (Py_IsInitialized() && PyGILState_Check()) {
      Py_DECREF(object);
      return;
    }
    AcquireGil gil;
    if (gil.held()) Py_DECREF(object);
  }

  PyObject* get() const { return ptr_; }
  pybind11::handle handle() const { return ptr_; }
  // A new reference (with the GIL held).
  pybind11::object object() const { return pybind11::reinterpret_borrow<pybind11::object>(ptr_); }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  PyObject* ptr_ = nullptr;
};

}  // namespace pyinterop
