// Core errors in the binding, which reaches the core only through the
// function table (core_api.h). The exception type, the guard for callbacks
// and the translation to Python exceptions are csrc/pyinterop's: the
// inprocess backend uses the same.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

#include "pyinterop/errors.h"
#include "triton/tritonserver.h"

namespace tritonpy {

using Error = pyinterop::Error;
using pyinterop::CString;

// Owns a TRITONSERVER_Error*; deletes it unless released.
class ErrorPtr {
 public:
  explicit ErrorPtr(TRITONSERVER_Error* err = nullptr) : err_(err) {}
  ~ErrorPtr();
  ErrorPtr(const ErrorPtr&) = delete;
  ErrorPtr& operator=(const ErrorPtr&) = delete;
  TRITONSERVER_Error* get() const { return err_; }

 private:
  TRITONSERVER_Error* err_;
};

// Throws Error (and deletes `err`) when `err` is not null.
void Check(TRITONSERVER_Error* err);

// A new core error carrying `code` and `message`, for returning from callbacks.
TRITONSERVER_Error* MakeError(TRITONSERVER_Error_Code code, const std::string& message);

// Runs `body` (which returns TRITONSERVER_Error*) for the core: any exception
// becomes a core error instead of unwinding into C.
template <typename Body>
TRITONSERVER_Error* GuardCallback(Body&& body) noexcept {
  return pyinterop::GuardToTriton(&MakeError, std::forward<Body>(body));
}

void RegisterErrors(pybind11::module_& m);

}  // namespace tritonpy
