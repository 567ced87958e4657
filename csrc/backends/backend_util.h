// Shared pieces of the example backends (identity, add_sub, repeat).
//
// A backend is one .cc file that defines the two hooks declared at the end of
// this header; backend_main.cc, compiled into every backend library, holds the
// TRITONBACKEND_* entry points and the execute loop that calls them. Inside a
// backend, failures are C++ exceptions (BackendError); they are turned into a
// TRITONSERVER_Error* before anything returns to the core.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tritonbackend.h"

namespace tritonserver::backends {

// ---- Errors -----------------------------------------------------------------

struct ErrorDeleter {
  void operator()(TRITONSERVER_Error* error) const {
    TRITONSERVER_ErrorDelete(error);
  }
};
using ErrorPtr = std::unique_ptr<TRITONSERVER_Error, ErrorDeleter>;

// A failure with a Triton error code.
class BackendError : public std::exception {
 public:
  BackendError(TRITONSERVER_Error_Code code, std::string message)
      : code_(code), message_(std::move(message)) {}

  const char* what() const noexcept override { return message_.c_str(); }
  TRITONSERVER_Error_Code code() const { return code_; }

 private:
  TRITONSERVER_Error_Code code_;
  std::string message_;
};

// Throws the core's error as a BackendError (and frees it).
inline void Check(TRITONSERVER_Error* error) {
  if (error == nullptr) return;
  ErrorPtr owned(error);
  throw BackendError(TRITONSERVER_ErrorCode(error),
                     TRITONSERVER_ErrorMessage(error));
}

// Runs `body`; returns null, or the exception it threw as a new error.
template <typename Fn>
TRITONSERVER_Error* Guard(Fn&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (const BackendError& e) {
    return TRITONSERVER_ErrorNew(e.code(), e.what());
  } catch (const std::exception& e) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, e.what());
  } catch (...) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL,
                                 "unknown exception in backend");
  }
}

// Logging never throws: it runs where nothing may unwind.
inline void Log(TRITONSERVER_LogLevel level, const char* message) noexcept {
  ErrorPtr(TRITONSERVER_LogMessage(level, __FILE__, __LINE__, message));
}

// For failures nobody can be told about but the log; frees `error`.
inline void LogIfError(TRITONSERVER_Error* error, const char* what) noexcept {
  if (error == nullptr) return;
  ErrorPtr owned(error);
  try {
    Log(TRITONSERVER_LOG_ERROR,
        (std::string(what) + ": " + TRITONSERVER_ErrorMessage(error)).c_str());
  } catch (...) {
    Log(TRITONSERVER_LOG_ERROR, what);
  }
}

inline uint64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---- Model configuration ----------------------------------------------------

struct MessageDeleter {
  void operator()(TRITONSERVER_Message* message) const {
    ErrorPtr(TRITONSERVER_MessageDelete(message));
  }
};
using MessagePtr = std::unique_ptr<TRITONSERVER_Message, MessageDeleter>;

inline std::string MessageJson(TRITONSERVER_Message* message) {
  const char* base = nullptr;
  size_t size = 0;
  Check(TRITONSERVER_MessageSerializeToJson(message, &base, &size));
  return std::string(base, size);
}

inline std::string ModelConfigJson(TRITONBACKEND_Model* model) {
  TRITONSERVER_Message* config = nullptr;
  Check(TRITONBACKEND_ModelConfig(model, 1, &config));
  MessagePtr owned(config);
  return MessageJson(owned.get());
}

// The scalar token after `"key":` (first match at or after `from`), without
// quotes; empty if absent. Enough for the few scalar fields read here, which
// the core's compact config JSON always prints.
inline std::string_view JsonScalar(std::string_view json, std::string_view key,
                                   size_t from = 0) {
  const std::string quoted = "\"" + std::string(key) + "\"";
  size_t pos = json.find(quoted, from);
  if (pos == std::string_view::npos) return {};
  pos = json.find_first_not_of(" \t\r\n:", pos + quoted.size());
  if (pos == std::string_view::npos) return {};
  if (json[pos] == '"') ++pos;
  const size_t end = json.find_first_of("\", \t\r\n}]", pos);
  return json.substr(pos, end == std::string_view::npos ? end : end - pos);
}

// What the backends need to know about a model; its TRITONBACKEND state.
struct ModelState {
  std::string name;
  int64_t max_batch_size = 0;  // > 0: the first dimension is the batch
  bool decoupled = false;
};

// A model instance's TRITONBACKEND state.
struct InstanceState {
  const ModelState* model = nullptr;
  std::string host_policy;  // empty: the input buffers not tied to a policy
};

// ---- Tensors ----------------------------------------------------------------

inline bool IsHostMemory(TRITONSERVER_MemoryType type) {
  return type == TRITONSERVER_MEMORY_CPU ||
         type == TRITONSERVER_MEMORY_CPU_PINNED;
}

inline std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i ? ", " : "") + std::to_string(shape[i]);
  }
  return text + "]";
}

// One input of a request; its data stays in the core's buffers, which must be
// in host memory.
class InputTensor {
 public:
  InputTensor(TRITONBACKEND_Request* request, const char* name,
              const std::string& host_policy) {
    TRITONBACKEND_Input* input = nullptr;
    if (TRITONSERVER_Error* error =
            TRITONBACKEND_RequestInput(request, name, &input)) {
      ErrorPtr owned(error);
      throw BackendError(
          TRITONSERVER_ERROR_INVALID_ARG,
          "the request has no input '" + std::string(name) + "'");
    }
    const char* policy = host_policy.empty() ? nullptr : host_policy.c_str();
    const int64_t* shape = nullptr;
    uint32_t dims = 0;
    uint32_t buffer_count = 0;
    Check(TRITONBACKEND_InputPropertiesForHostPolicy(
        input, policy, nullptr, &dtype_, &shape, &dims, &byte_size_,
        &buffer_count));
    name_ = name;
    shape_.assign(shape, shape + dims);
    for (uint32_t i = 0; i < buffer_count; ++i) {
      const void* data = nullptr;
      uint64_t size = 0;
      TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
      int64_t type_id = 0;
      Check(TRITONBACKEND_InputBufferForHostPolicy(input, policy, i, &data,
                                                   &size, &type, &type_id));
      if (!IsHostMemory(type)) {
        throw BackendError(TRITONSERVER_ERROR_UNSUPPORTED,
                           "input '" + name_ + "' is in " +
                               TRITONSERVER_MemoryTypeString(type) +
                               " memory; this backend reads host memory only");
      }
      chunks_.emplace_back(static_cast<const char*>(data), size);
    }
  }

  const std::string& name() const { return name_; }
  TRITONSERVER_DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  uint64_t byte_size() const { return byte_size_; }

  // Writes the whole tensor, buffer after buffer, to `dst` (byte_size bytes).
  void CopyTo(char* dst) const {
    for (const auto& [data, size] : chunks_) {
      if (size != 0) std::memcpy(dst, data, size);
      dst += size;
    }
  }

  // The elements as T; the data must be exactly shape's element count of T.
  template <typename T>
  std::vector<T> Values() const {
    int64_t count = 1;
    for (int64_t dim : shape_) count *= dim;
    if (count < 0 || byte_size_ != static_cast<uint64_t>(count) * sizeof(T)) {
      throw BackendError(
          TRITONSERVER_ERROR_INVALID_ARG,
          "input '" + name_ + "' has " + std::to_string(byte_size_) +
              " bytes, which does not match its shape " + ShapeString(shape_));
    }
    std::vector<T> values(count);
    CopyTo(reinterpret_cast<char*>(values.data()));
    return values;
  }

 private:
  std::string name_;
  TRITONSERVER_DataType dtype_ = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> shape_;
  uint64_t byte_size_ = 0;
  std::vector<std::pair<const char*, uint64_t>> chunks_;
};

struct ResponseDeleter {
  void operator()(TRITONBACKEND_Response* response) const {
    LogIfError(TRITONBACKEND_ResponseDelete(response), "deleting a response");
  }
};
// A response being built; deleted unless it was sent.
using ResponsePtr = std::unique_ptr<TRITONBACKEND_Response, ResponseDeleter>;

// Adds an output to `response` and returns its host buffer of `byte_size`.
inline char* AddOutput(TRITONBACKEND_Response* response,
                       const std::string& name, TRITONSERVER_DataType dtype,
                       const std::vector<int64_t>& shape, uint64_t byte_size) {
  TRITONBACKEND_Output* output = nullptr;
  Check(TRITONBACKEND_ResponseOutput(response, &output, name.c_str(), dtype,
                                     shape.data(),
                                     static_cast<uint32_t>(shape.size())));
  void* buffer = nullptr;
  TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
  int64_t type_id = 0;
  Check(
      TRITONBACKEND_OutputBuffer(output, &buffer, byte_size, &type, &type_id));
  if (!IsHostMemory(type)) {
    throw BackendError(TRITONSERVER_ERROR_UNSUPPORTED,
                       "output '" + name + "' was given " +
                           TRITONSERVER_MemoryTypeString(type) +
                           " memory; this backend writes host memory only");
  }
  return static_cast<char*>(buffer);
}

inline void WriteOutput(TRITONBACKEND_Response* response,
                        const std::string& name, TRITONSERVER_DataType dtype,
                        const std::vector<int64_t>& shape, const void* data,
                        uint64_t byte_size) {
  char* buffer = AddOutput(response, name, dtype, shape, byte_size);
  if (byte_size != 0) std::memcpy(buffer, data, byte_size);
}

// ---- One request ------------------------------------------------------------

// What a backend sees of one request while it answers it. Responses go
// through a response factory, so a backend may send one response or many.
class RequestContext {
 public:
  RequestContext(const InstanceState& state, TRITONBACKEND_Request* request)
      : state_(state), request_(request), exec_start_ns_(NowNs()) {}
  RequestContext(const RequestContext&) = delete;
  RequestContext& operator=(const RequestContext&) = delete;
  ~RequestContext() {
    if (factory_ != nullptr) {
      LogIfError(TRITONBACKEND_ResponseFactoryDelete(factory_),
                 "deleting a response factory");
    }
  }

  const ModelState& model() const { return *state_.model; }

  InputTensor Input(const char* name) const {
    return InputTensor(request_, name, state_.host_policy);
  }

  // The outputs to produce: those the client asked for, or all of the model's.
  std::vector<std::string> RequestedOutputs() const {
    uint32_t count = 0;
    Check(TRITONBACKEND_RequestOutputCount(request_, &count));
    std::vector<std::string> names;
    for (uint32_t i = 0; i < count; ++i) {
      const char* name = nullptr;
      Check(TRITONBACKEND_RequestOutputName(request_, i, &name));
      names.emplace_back(name);
    }
    return names;
  }

  bool IsCancelled() {
    bool cancelled = false;
    Check(TRITONBACKEND_ResponseFactoryIsCancelled(Factory(), &cancelled));
    return cancelled;
  }

  void MarkComputeStart() { compute_start_ns_ = NowNs(); }
  void MarkComputeEnd() { compute_end_ns_ = NowNs(); }

  // Starts a response; create all its outputs before the next NewResponse.
  ResponsePtr NewResponse() {
    TRITONBACKEND_Response* response = nullptr;
    Check(TRITONBACKEND_ResponseNewFromFactory(&response, Factory()));
    return ResponsePtr(response);
  }

  // Sends a finished response; `final` ends the request's stream.
  void Send(ResponsePtr response, bool final) {
    const uint32_t flags = final ? TRITONSERVER_RESPONSE_COMPLETE_FINAL : 0;
    final_sent_ = final_sent_ || final;  // the core owns it even on failure
    Check(TRITONBACKEND_ResponseSend(response.release(), flags, nullptr));
  }

  // Ends the request's stream without another response.
  void SendFinal() {
    Check(TRITONBACKEND_ResponseFactorySendFlags(
        Factory(), TRITONSERVER_RESPONSE_COMPLETE_FINAL));
    final_sent_ = true;
  }

  // Ends the request's stream with an error response, unless it has ended.
  void SendError(TRITONSERVER_Error* error) noexcept {
    if (final_sent_) {
      LogIfError(TRITONSERVER_ErrorNew(TRITONSERVER_ErrorCode(error),
                                       TRITONSERVER_ErrorMessage(error)),
                 "request failed after its final response");
      return;
    }
    final_sent_ = true;
    TRITONBACKEND_Response* response = nullptr;
    TRITONSERVER_Error* failed =
        factory_ != nullptr
            ? TRITONBACKEND_ResponseNewFromFactory(&response, factory_)
            : TRITONBACKEND_ResponseNew(&response, request_);
    if (failed == nullptr) {
      failed = TRITONBACKEND_ResponseSend(
          response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, error);
    }
    LogIfError(failed, "sending an error response");
  }

  // The number of batch items in the request (1 for a model without batching).
  uint64_t BatchSize() const {
    if (model().max_batch_size <= 0) return 1;
    TRITONBACKEND_Input* input = nullptr;
    const int64_t* shape = nullptr;
    uint32_t dims = 0;
    Check(TRITONBACKEND_RequestInputByIndex(request_, 0, &input));
    Check(TRITONBACKEND_InputProperties(input, nullptr, nullptr, &shape, &dims,
                                        nullptr, nullptr));
    return dims > 0 && shape[0] > 0 ? static_cast<uint64_t>(shape[0]) : 1;
  }

  bool final_sent() const { return final_sent_; }
  uint64_t exec_start_ns() const { return exec_start_ns_; }
  uint64_t compute_start_ns() const {
    return compute_start_ns_ ? compute_start_ns_ : exec_start_ns_;
  }
  uint64_t compute_end_ns(uint64_t fallback) const {
    return compute_end_ns_ ? compute_end_ns_ : fallback;
  }

 private:
  TRITONBACKEND_ResponseFactory* Factory() {
    if (factory_ == nullptr) {
      Check(TRITONBACKEND_ResponseFactoryNew(&factory_, request_));
    }
    return factory_;
  }

  const InstanceState& state_;
  TRITONBACKEND_Request* request_;
  TRITONBACKEND_ResponseFactory* factory_ = nullptr;
  bool final_sent_ = false;
  uint64_t exec_start_ns_;
  uint64_t compute_start_ns_ = 0;
  uint64_t compute_end_ns_ = 0;
};

// ---- Hooks each backend defines ---------------------------------------------

// Checks a model's configuration when it loads; throw to refuse the model.
void ValidateModel(const ModelState& model);

// Answers one request: sends its response(s), the last one (or a bare
// SendFinal) final. Throwing instead makes the request fail with that error;
// the other requests of the batch are unaffected.
void ExecuteRequest(RequestContext& ctx);

}  // namespace tritonserver::backends
