// Triton errors as C++ exceptions, and back.
//
// A TRITONSERVER_Error* returned by the core becomes a TritonError, which
// pybind11 translates to the Python class registered for its code (the
// mapping lives in tritonserver/_errors.py, the only place that names them).
// Going the other way, GuardCallback turns any exception thrown inside a
// callback that the core calls into a TRITONSERVER_Error*, so nothing ever
// unwinds through C.
#pragma once

#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

#include "triton/tritonserver.h"

namespace tritonpy {

class TritonError : public std::runtime_error {
 public:
  TritonError(TRITONSERVER_Error_Code code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  TRITONSERVER_Error_Code code() const { return code_; }

 private:
  TRITONSERVER_Error_Code code_;
};

// Owns a TRITONSERVER_Error*; deletes it unless released.
class ErrorPtr {
 public:
  explicit ErrorPtr(TRITONSERVER_Error* err = nullptr) : err_(err) {}
  ~ErrorPtr();
  ErrorPtr(const ErrorPtr&) = delete;
  ErrorPtr& operator=(const ErrorPtr&) = delete;
  TRITONSERVER_Error* get() const { return err_; }
  TRITONSERVER_Error* release() {
    TRITONSERVER_Error* e = err_;
    err_ = nullptr;
    return e;
  }

 private:
  TRITONSERVER_Error* err_;
};

// Throws TritonError (and deletes `err`) when `err` is not null.
void Check(TRITONSERVER_Error* err);

// Code and message of an error the caller keeps owning.
TritonError ToException(TRITONSERVER_Error* err);

// A new core error carrying `code` and `message`, for returning from callbacks.
TRITONSERVER_Error* MakeError(TRITONSERVER_Error_Code code,
                              const std::string& message);

// Runs `body` (which returns TRITONSERVER_Error*) and converts any exception
// into a core error instead of letting it escape into C.
template <typename Body>
TRITONSERVER_Error* GuardCallback(Body&& body) noexcept {
  try {
    return body();
  } catch (const TritonError& e) {
    return MakeError(e.code(), e.what());
  } catch (const std::exception& e) {
    return MakeError(TRITONSERVER_ERROR_INTERNAL, e.what());
  } catch (...) {
    return MakeError(TRITONSERVER_ERROR_INTERNAL,
                     "unknown exception in a tritonserver callback");
  }
}

void RegisterErrors(pybind11::module_& m);

}  // namespace tritonpy
