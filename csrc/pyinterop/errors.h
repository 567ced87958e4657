// Failures between C++, Python and the Triton core.
//
// C++ code of this project signals a failure by throwing
// tritonserver::backend::Error (a Triton error code and a message; the
// backend SDK's error type). Where C++ meets the others:
//  - called by the core (a callback, a backend entry point): GuardToTriton
//    turns whatever was thrown into a TRITONSERVER_Error*, so nothing
//    unwinds through C;
//  - called by Python (a bound function): the translator installed by
//    RegisterErrorTranslator raises the tritonserver exception class of the
//    error's code;
//  - calling Python: a Python exception arrives as pybind11's
//    error_already_set, and CurrentFailure gives its Triton code and message
//    (tritonserver._errors.describe_exception decides them).
#pragma once

#include <pybind11/pybind11.h>
#include <tritonserver/backend/error.h>

#include <exception>
#include <new>
#include <string>
#include <utility>

#include "pyinterop/gil.h"

namespace pyinterop {

using Error = tritonserver::backend::Error;
using tritonserver::backend::CString;

struct Failure {
  TRITONSERVER_Error_Code code;
  std::string message;
};

// A function of the tritonserver._errors module, looked up at each use
// (errors are rare; the package imports the module before any of this runs).
inline pybind11::object ErrorsFunction(const char* name) {
  return pybind11::module_::import("tritonserver._errors").attr(name);
}

// The code and message of a Python exception object (with the GIL).
inline Failure DescribePython(pybind11::handle exception) {
  pybind11::tuple described =
      ErrorsFunction("describe_exception")(exception).cast<pybind11::tuple>();
  return {static_cast<TRITONSERVER_Error_Code>(described[0].cast<int>()),
          described[1].cast<std::string>()};
}

// The exception being handled, as a Failure. Call it from a catch block.
inline Failure CurrentFailure() noexcept {
  try {
    throw;
  } catch (const Error& e) {
    return {e.code(), e.message()};
  } catch (pybind11::error_already_set& e) {
    AcquireGil gil;
    if (gil.held()) {
      try {
        return DescribePython(e.value());
      } catch (...) {
        PyErr_Clear();
      }
    }
    return {TRITONSERVER_ERROR_INTERNAL, e.what()};
  } catch (const std::exception& e) {
    return {TRITONSERVER_ERROR_INTERNAL, e.what()};
  } catch (...) {
    return {TRITONSERVER_ERROR_INTERNAL, "unknown C++ exception"};
  }
}

// Inside a catch block: rethrows the exception as an Error (a Python
// exception with the code and message tritonserver._errors gives it).
[[noreturn]] inline void ThrowAsError() {
  Failure failure = CurrentFailure();
  throw Error(failure.code, std::move(failure.message));
}

// Runs `body` (which returns TRITONSERVER_Error*) for a caller in C: an
// exception becomes the error `make(code, message)` returns.
template <typename Make, typename Body>
TRITONSERVER_Error* GuardToTriton(Make&& make, Body&& body) noexcept {
  try {
    return body();
  } catch (...) {
    Failure failure = CurrentFailure();
    try {
      return make(failure.code, failure.message);
    } catch (...) {
      return make(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    }
  }
}

// Sets the Python exception of `e`: the tritonserver exception class of its
// code, with its message (with the GIL).
inline void SetPythonError(const Error& e) {
  pybind11::object error =
      ErrorsFunction("error_from_code")(static_cast<int>(e.code()), e.message());
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
}

// Raises Error as the tritonserver exception class of its code, for the
// functions bound by the calling shared library.
inline void RegisterErrorTranslator() {
  pybind11::register_local_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      SetPythonError(e);
    }
  });
}

// Inside a catch block of a function CPython calls directly (a plain C
// method, no pybind11 dispatcher around it): sets the Python exception
// pybind11 would have raised for what was thrown. The caller returns null.
inline void SetPythonErrorFromCurrent() noexcept {
  try {
    throw;
  } catch (pybind11::error_already_set& e) {
    e.restore();
  } catch (const Error& e) {
    try {
      SetPythonError(e);
    } catch (pybind11::error_already_set& inner) {
      inner.restore();
    } catch (...) {
      PyErr_SetString(PyExc_RuntimeError, e.message().c_str());
    }
  } catch (const pybind11::builtin_exception& e) {
    e.set_error();
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "unknown C++ exception");
  }
}

}  // namespace pyinterop
