// Errors and logging for backends built on <tritonserver/backend.h>.
//
// Inside a backend, failures are C++ exceptions. The SDK catches every
// exception at the C boundary and hands the core a TRITONSERVER_Error with
// the exception's message: an Error keeps its code, any other std::exception
// becomes INTERNAL.
#pragma once

#include <exception>
#include <memory>
#include <string>
#include <utility>

#include "triton/tritonbackend.h"

namespace tritonserver::backend {

// A failure with a Triton error code.
class Error : public std::exception {
 public:
  Error(TRITONSERVER_Error_Code code, std::string message)
      : code_(code), message_(std::move(message)) {}
  explicit Error(std::string message) : Error(TRITONSERVER_ERROR_INTERNAL, std::move(message)) {}

  static Error InvalidArgument(std::string message) {
    return Error(TRITONSERVER_ERROR_INVALID_ARG, std::move(message));
  }
  static Error Unsupported(std::string message) {
    return Error(TRITONSERVER_ERROR_UNSUPPORTED, std::move(message));
  }
  static Error NotFound(std::string message) {
    return Error(TRITONSERVER_ERROR_NOT_FOUND, std::move(message));
  }
  static Error Unavailable(std::string message) {
    return Error(TRITONSERVER_ERROR_UNAVAILABLE, std::move(message));
  }
  static Error Cancelled(std::string message) {
    return Error(TRITONSERVER_ERROR_CANCELLED, std::move(message));
  }
  static Error Internal(std::string message) {
    return Error(TRITONSERVER_ERROR_INTERNAL, std::move(message));
  }

  TRITONSERVER_Error_Code code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  TRITONSERVER_Error_Code code_;
  std::string message_;
};

// `text` as the C string a core function takes. The core reads a name up
// to its first NUL character, so text holding one would name something
// else (an input "IN\0X" would be taken as "IN"): such text is refused, as
// an invalid argument that says which `what` ("input name", ...) it was.
inline const char* CString(const std::string& text, const char* what) {
  if (text.find('\0') == std::string::npos) return text.c_str();
  std::string shown;
  for (char c : text) shown += c == '\0' ? std::string("\\x00") : std::string(1, c);
  throw Error::InvalidArgument(std::string(what) + " '" + shown +
                               "' holds a NUL character, where the core's text ends");
}

namespace detail {

struct ErrorDeleter {
  void operator()(TRITONSERVER_Error* error) const noexcept { TRITONSERVER_ErrorDelete(error); }
};
using ErrorPtr = std::unique_ptr<TRITONSERVER_Error, ErrorDeleter>;

// The core's error as an Error; frees `error`.
inline Error TakeError(TRITONSERVER_Error* error) {
  ErrorPtr owned(error);
  return Error(TRITONSERVER_ErrorCode(error), TRITONSERVER_ErrorMessage(error));
}

// The exception being handled as a new core error (never throws).
inline TRITONSERVER_Error* CurrentExceptionToError() noexcept {
  try {
    throw;
  } catch (const Error& e) {
    return TRITONSERVER_ErrorNew(e.code(), e.what());
  } catch (const std::exception& e) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, e.what());
  } catch (...) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "unknown exception in backend");
  }
}

}  // namespace detail

// Throws the core's error (if any) as an Error, freeing it. For the return
// value of every TRITONBACKEND_* / TRITONSERVER_* call.
inline void Check(TRITONSERVER_Error* error) {
  if (error != nullptr) throw detail::TakeError(error);
}

// Runs `body`; returns null, or what it threw as a new core error. This is
// how every entry point of the SDK keeps exceptions out of C.
template <typename Fn>
TRITONSERVER_Error* Guard(Fn&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (...) {
    return detail::CurrentExceptionToError();
  }
}

// ---- Logging ----------------------------------------------------------------
// Messages go to the server's log (enabled per level in the server options).
// Logging never throws.

inline void Log(TRITONSERVER_LogLevel level, const std::string& message,
                const char* file = __builtin_FILE(), int line = __builtin_LINE()) noexcept {
  if (!TRITONSERVER_LogIsEnabled(level)) return;
  detail::ErrorPtr(TRITONSERVER_LogMessage(level, file, line, message.c_str()));
}
inline void LogInfo(const std::string& message, const char* file = __builtin_FILE(),
                    int line = __builtin_LINE()) noexcept {
  Log(TRITONSERVER_LOG_INFO, message, file, line);
}
inline void LogWarning(const std::string& message, const char* file = __builtin_FILE(),
                       int line = __builtin_LINE()) noexcept {
  Log(TRITONSERVER_LOG_WARN, message, file, line);
}
inline void LogError(const std::string& message, const char* file = __builtin_FILE(),
                     int line = __builtin_LINE()) noexcept {
  Log(TRITONSERVER_LOG_ERROR, message, file, line);
}

namespace detail {

// For failures only the log can be told about; frees `error`.
inline void LogIfError(TRITONSERVER_Error* error, const char* what) noexcept {
  if (error == nullptr) return;
  ErrorPtr owned(error);
  if (!TRITONSERVER_LogIsEnabled(TRITONSERVER_LOG_ERROR)) return;
  try {
    LogError(std::string(what) + ": " + TRITONSERVER_ErrorMessage(error));
  } catch (...) {  // out of memory building the message
    ErrorPtr(TRITONSERVER_LogMessage(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, what));
  }
}

}  // namespace detail
}  // namespace tritonserver::backend
