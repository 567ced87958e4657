// Requests, responses and the batch handed to Backend::Execute.
//
// The SDK owns every request: a backend answers it (Response::Send, or
// Request::Finish / Request::Fail) and the SDK reports its statistics and
// releases it, exactly once, when Execute returns. A request left without a
// final response is failed by the SDK.
//
// A request may also outlive Execute (a decoupled model answering from
// another thread later, or a backend whose caller still reads the request's
// input buffers): Requests::Keep hands it over to the backend, which then
// owns it as a std::unique_ptr<Request>. The SDK no longer answers or
// releases a kept request; it reports its statistics when its final
// response is sent, and destroying the kept Request releases it (failing it
// first if it never got a final response).
#pragma once

#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tritonserver/backend/error.h"
#include "tritonserver/backend/model.h"
#include "tritonserver/backend/tensor.h"

namespace tritonserver::backend {

class Request;

// A request's correlation id (sequence id): a number, or a string.
struct CorrelationId {
  uint64_t number = 0;
  std::string text;
  bool is_string = false;

  // "42" or "s:abc": one key per sequence, whichever kind of id it has.
  std::string Key() const { return is_string ? "s:" + text : std::to_string(number); }
  bool empty() const { return is_string ? text.empty() : number == 0; }
};

// A response being built for one request. Add its outputs, then Send it;
// a response dropped without Send is deleted and the client sees nothing.
class Response {
 public:
  Response(Response&& other) noexcept
      : request_(other.request_), handle_(other.handle_), staged_(std::move(other.staged_)) {
    other.handle_ = nullptr;
  }
  Response& operator=(Response&& other) noexcept {
    if (this != &other) {
      Drop();
      request_ = other.request_;
      handle_ = other.handle_;
      staged_ = std::move(other.staged_);
      other.handle_ = nullptr;
    }
    return *this;
  }
  Response(const Response&) = delete;
  Response& operator=(const Response&) = delete;
  ~Response() { Drop(); }

  TRITONBACKEND_Response* handle() const { return handle_; }

  // Adds an output with a buffer in host memory: byte_size bytes, or (when
  // omitted) shape's element count times the datatype's size. Where the
  // client's allocator puts the output in GPU memory, the buffer is a host
  // copy that Send() copies there.
  OutputTensor AddOutput(const std::string& name, TRITONSERVER_DataType dtype,
                         const std::vector<int64_t>& shape,
                         std::optional<uint64_t> byte_size = std::nullopt) {
    OutputTensor out = AddOutputBuffer(name, dtype, shape, byte_size);
    if (IsHostMemory(out.memory_type())) return out;
    Staged& staged = staged_.emplace_back();
    staged.target = out;
    staged.host.reset(new char[out.byte_size() ? out.byte_size() : 1]);
    return OutputTensor(name, dtype, shape, staged.host.get(), out.byte_size());
  }

  // Adds an output whose buffer is wherever the client's allocator puts it,
  // asking for `preferred` memory (on GPU `preferred_id`: an instance's
  // device, for example): the result's memory_type() says where it is, and
  // CopyMemory (cuda.h) fills a buffer in any memory.
  OutputTensor AddOutputBuffer(const std::string& name, TRITONSERVER_DataType dtype,
                               const std::vector<int64_t>& shape,
                               std::optional<uint64_t> byte_size = std::nullopt,
                               TRITONSERVER_MemoryType preferred = TRITONSERVER_MEMORY_CPU,
                               int64_t preferred_id = 0) {
    RequireOpen();
    uint64_t size = 0;
    if (byte_size.has_value()) {
      size = *byte_size;
    } else if (ElementByteSize(dtype) == 0) {
      throw Error::InvalidArgument("output '" + name + "' is " + DataTypeName(dtype) +
                                   ": give its byte size");
    } else {
      size = ElementCount(shape) * ElementByteSize(dtype);
    }
    TRITONBACKEND_Output* output = nullptr;
    Check(TRITONBACKEND_ResponseOutput(handle_, &output, CString(name, "output name"), dtype,
                                       shape.data(), static_cast<uint32_t>(shape.size())));
    void* buffer = nullptr;
    TRITONSERVER_MemoryType type = preferred;
    int64_t type_id = preferred_id;
    Check(TRITONBACKEND_OutputBuffer(output, &buffer, size, &type, &type_id));
    return OutputTensor(name, dtype, shape, buffer, size, type, type_id);
  }

  // Adds an output holding a copy of `byte_size` bytes at `data`.
  void SetOutputBytes(const std::string& name, TRITONSERVER_DataType dtype,
                      const std::vector<int64_t>& shape, const void* data, uint64_t byte_size) {
    OutputTensor out = AddOutput(name, dtype, shape, byte_size);
    if (byte_size != 0) std::memcpy(out.data(), data, byte_size);
  }

  // Adds an output holding a copy of `values` (shape's element count of T).
  template <typename T>
  void SetOutput(const std::string& name, const std::vector<int64_t>& shape, const T* values,
                 size_t count) {
    if (count != ElementCount(shape)) {
      throw Error::InvalidArgument("output '" + name + "': " + std::to_string(count) +
                                   " values do not fill shape " + ShapeString(shape));
    }
    SetOutputBytes(name, DataTypeOf<T>::value, shape, values, count * sizeof(T));
  }
  template <typename T>
  void SetOutput(const std::string& name, const std::vector<int64_t>& shape,
                 const std::vector<T>& values) {
    SetOutput(name, shape, values.data(), values.size());
  }

  // Adds a BYTES output from strings (anything std::string_view converts from).
  template <typename Strings>
  void SetStringOutput(const std::string& name, const std::vector<int64_t>& shape,
                       const Strings& values) {
    const std::string wire = SerializeStrings(values);
    SetOutputBytes(name, TRITONSERVER_TYPE_BYTES, shape, wire.data(), wire.size());
  }

  void SetStringParameter(const std::string& name, const std::string& value) {
    RequireOpen();
    Check(TRITONBACKEND_ResponseSetStringParameter(handle_, CString(name, "parameter name"),
                                                   CString(value, "parameter value")));
  }
  void SetIntParameter(const std::string& name, int64_t value) {
    RequireOpen();
    Check(TRITONBACKEND_ResponseSetIntParameter(handle_, CString(name, "parameter name"), value));
  }
  void SetBoolParameter(const std::string& name, bool value) {
    RequireOpen();
    Check(TRITONBACKEND_ResponseSetBoolParameter(handle_, CString(name, "parameter name"), value));
  }
  void SetDoubleParameter(const std::string& name, double value) {
    RequireOpen();
    Check(
        TRITONBACKEND_ResponseSetDoubleParameter(handle_, CString(name, "parameter name"), value));
  }

  // Sends the response. `final` (the default) makes it the request's last
  // one; only a decoupled model may send non-final responses.
  inline void Send(bool final = true);

  // Sends the response as an error (its outputs are dropped): a decoupled
  // model's stream may go on after a non-final one, as Triton's python
  // backend lets a model send an error response and then more.
  inline void SendError(TRITONSERVER_Error_Code code, const std::string& message,
                        bool final = true);

 private:
  friend class Request;
  Response(Request* request, TRITONBACKEND_Response* handle) : request_(request), handle_(handle) {}

  void RequireOpen() const {
    if (handle_ == nullptr) {
      throw Error::Internal("this response was already sent");
    }
  }
  void Drop() noexcept {
    if (handle_ != nullptr) {
      detail::LogIfError(TRITONBACKEND_ResponseDelete(handle_), "deleting an unsent response");
      handle_ = nullptr;
    }
  }

  // Copies the host copies AddOutput gave to their buffers in GPU memory.
  void CopyStaged() {
    for (const Staged& staged : staged_) {
      const OutputTensor& t = staged.target;
      CopyMemory(t.data(), t.memory_type(), t.memory_type_id(), staged.host.get(),
                 TRITONSERVER_MEMORY_CPU, 0, t.byte_size());
    }
    staged_.clear();
  }

  // An output AddOutput gave a host copy of, and its buffer in GPU memory.
  struct Staged {
    OutputTensor target{"", TRITONSERVER_TYPE_INVALID, {}, nullptr, 0};
    std::unique_ptr<char[]> host;
  };

  Request* request_;
  TRITONBACKEND_Response* handle_;
  std::vector<Staged> staged_;
};

// One request of a batch. Valid during the Execute that received it, or
// for as long as the backend owns it after Requests::Keep. Not thread-safe:
// one thread at a time uses it (a backend may hand it to a helper thread
// that Execute waits for, or guard a kept request with its own mutex).
class Request {
 public:
  Request(TRITONBACKEND_Request* request, Instance& instance)
      : handle_(request), instance_(&instance) {}
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;
  // A kept request (Requests::Keep) is failed if it got no final response,
  // then released.
  ~Request() {
    if (kept_ && rescheduled_ && !finished_ && Reschedule()) {
      if (factory_ != nullptr) {
        detail::LogIfError(TRITONBACKEND_ResponseFactoryDelete(factory_),
                           "deleting a response factory");
      }
      return;
    }
    if (kept_ && !finished_) {
      Fail(TRITONSERVER_ERROR_INTERNAL,
           "the backend let go of the request without a final response");
    }
    if (factory_ != nullptr) {
      detail::LogIfError(TRITONBACKEND_ResponseFactoryDelete(factory_),
                         "deleting a response factory");
    }
    if (kept_) {
      detail::LogIfError(TRITONBACKEND_RequestRelease(handle_, TRITONSERVER_REQUEST_RELEASE_ALL),
                         "releasing a request");
    }
  }

  TRITONBACKEND_Request* handle() const { return handle_; }
  Instance& instance() const { return *instance_; }
  Model& model() const { return instance_->model(); }

  // ---- What was asked -------------------------------------------------------

  std::string id() const {
    const char* id = nullptr;
    Check(TRITONBACKEND_RequestId(handle_, &id));
    return id != nullptr ? id : "";
  }

  CorrelationId correlation_id() const {
    CorrelationId out;
    TRITONSERVER_Error* error = TRITONBACKEND_RequestCorrelationId(handle_, &out.number);
    if (error == nullptr) return out;
    detail::ErrorPtr owned(error);  // not a number: then it is a string
    const char* text = nullptr;
    Check(TRITONBACKEND_RequestCorrelationIdString(handle_, &text));
    out.text = text != nullptr ? text : "";
    out.is_string = true;
    return out;
  }

  // TRITONSERVER_RequestFlag bits: sequence start and end.
  uint32_t flags() const {
    uint32_t flags = 0;
    Check(TRITONBACKEND_RequestFlags(handle_, &flags));
    return flags;
  }
  bool sequence_start() const { return (flags() & TRITONSERVER_REQUEST_FLAG_SEQUENCE_START) != 0; }
  bool sequence_end() const { return (flags() & TRITONSERVER_REQUEST_FLAG_SEQUENCE_END) != 0; }

  // The client's timeout in microseconds (0: none).
  uint64_t timeout_us() const {
    uint64_t timeout = 0;
    Check(TRITONBACKEND_InferenceRequestTimeoutMicroseconds(handle_, &timeout));
    return timeout;
  }

  // Whether the client cancelled the request; a long or streaming backend
  // checks this and stops (Fail with Error::Cancelled).
  bool IsCancelled() const {
    bool cancelled = false;
    if (factory_ != nullptr) {
      Check(TRITONBACKEND_ResponseFactoryIsCancelled(factory_, &cancelled));
    } else {
      Check(TRITONBACKEND_RequestIsCancelled(handle_, &cancelled));
    }
    return cancelled;
  }

  std::vector<std::string> InputNames() const {
    uint32_t count = 0;
    Check(TRITONBACKEND_RequestInputCount(handle_, &count));
    std::vector<std::string> names;
    for (uint32_t i = 0; i < count; ++i) {
      const char* name = nullptr;
      Check(TRITONBACKEND_RequestInputName(handle_, i, &name));
      names.emplace_back(name);
    }
    return names;
  }

  bool HasInput(const std::string& name) const {
    if (name.find('\0') != std::string::npos) return false;  // no input's name holds one
    TRITONBACKEND_Input* input = nullptr;
    TRITONSERVER_Error* error = TRITONBACKEND_RequestInput(handle_, name.c_str(), &input);
    detail::ErrorPtr owned(error);
    return error == nullptr;
  }

  InputTensor Input(const std::string& name) const {
    TRITONBACKEND_Input* input = nullptr;
    if (TRITONSERVER_Error* error =
            TRITONBACKEND_RequestInput(handle_, CString(name, "input name"), &input)) {
      detail::ErrorPtr owned(error);
      throw Error::InvalidArgument("the request has no input '" + name + "'");
    }
    return InputTensor(input, HostPolicy());
  }

  InputTensor Input(uint32_t index) const {
    TRITONBACKEND_Input* input = nullptr;
    Check(TRITONBACKEND_RequestInputByIndex(handle_, index, &input));
    return InputTensor(input, HostPolicy());
  }

  // The outputs to produce: those the client asked for, or all of the
  // model's when it named none.
  std::vector<std::string> RequestedOutputs() const {
    uint32_t count = 0;
    Check(TRITONBACKEND_RequestOutputCount(handle_, &count));
    std::vector<std::string> names;
    for (uint32_t i = 0; i < count; ++i) {
      const char* name = nullptr;
      Check(TRITONBACKEND_RequestOutputName(handle_, i, &name));
      names.emplace_back(name);
    }
    return names;
  }

  // Whether a batching model got a batch of no items. The core gives such a
  // request's inputs without their batch dimension (it takes batch size 0
  // to mean "not batched"), so that is what gives it away.
  bool empty_batch() const {
    if (!model().batching()) return false;
    uint32_t count = 0;
    Check(TRITONBACKEND_RequestInputCount(handle_, &count));
    for (uint32_t i = 0; i < count; ++i) {
      TRITONBACKEND_Input* input = nullptr;
      const char* name = nullptr;
      uint32_t dims = 0;
      Check(TRITONBACKEND_RequestInputByIndex(handle_, i, &input));
      Check(TRITONBACKEND_InputProperties(input, &name, nullptr, nullptr, &dims, nullptr, nullptr));
      const size_t rank = model().batched_rank(name);
      if (rank > 0) return dims + 1 == rank;
    }
    return false;
  }

  // The batch items in this request: the first dimension of its first input
  // when the model batches, else 1.
  uint64_t batch_size() const {
    if (!model().batching()) return 1;
    TRITONBACKEND_Input* input = nullptr;
    const int64_t* shape = nullptr;
    uint32_t dims = 0;
    Check(TRITONBACKEND_RequestInputByIndex(handle_, 0, &input));
    Check(TRITONBACKEND_InputProperties(input, nullptr, nullptr, &shape, &dims, nullptr, nullptr));
    return dims > 0 && shape[0] > 0 ? static_cast<uint64_t>(shape[0]) : 1;
  }

  // Request parameters set by the client, by name and type.
  std::optional<std::string> StringParameter(std::string_view key) const {
    const void* value = FindParameter(key, TRITONSERVER_PARAMETER_STRING);
    if (value == nullptr) return std::nullopt;
    return std::string(static_cast<const char*>(value));
  }
  std::optional<int64_t> IntParameter(std::string_view key) const {
    const void* value = FindParameter(key, TRITONSERVER_PARAMETER_INT);
    if (value == nullptr) return std::nullopt;
    return *static_cast<const int64_t*>(value);
  }
  std::optional<bool> BoolParameter(std::string_view key) const {
    const void* value = FindParameter(key, TRITONSERVER_PARAMETER_BOOL);
    if (value == nullptr) return std::nullopt;
    return *static_cast<const bool*>(value);
  }
  std::optional<double> DoubleParameter(std::string_view key) const {
    const void* value = FindParameter(key, TRITONSERVER_PARAMETER_DOUBLE);
    if (value == nullptr) return std::nullopt;
    return *static_cast<const double*>(value);
  }

  // ---- Answering ------------------------------------------------------------

  // Starts a response. Create every output of a response before starting
  // the next one.
  Response NewResponse() {
    RequireOpen();
    TRITONBACKEND_Response* response = nullptr;
    if (model().decoupled()) {  // a stream of responses: through a factory
      Check(TRITONBACKEND_ResponseNewFromFactory(&response, Factory()));
    } else {
      Check(TRITONBACKEND_ResponseNew(&response, handle_));
    }
    return Response(this, response);
  }

  // Ends a decoupled request's stream without another response.
  void Finish() {
    RequireOpen();
    if (!model().decoupled()) {
      throw Error::Internal("model '" + model().name() +
                            "' is not decoupled: answer each request with "
                            "one response (Response::Send)");
    }
    Check(TRITONBACKEND_ResponseFactorySendFlags(Factory(), TRITONSERVER_RESPONSE_COMPLETE_FINAL));
    MarkFinished(false);
  }

  // Ends the request with an error response (its final one). Never throws;
  // a request already finished only logs the error.
  void Fail(const Error& error) noexcept { Fail(error.code(), error.what()); }
  void Fail(TRITONSERVER_Error_Code code, const char* message) noexcept {
    if (finished_) {
      LogError(std::string("request failed after its final response: ") + message);
      return;
    }
    MarkFinished(true);
    detail::ErrorPtr error(TRITONSERVER_ErrorNew(code, message));
    TRITONBACKEND_Response* response = nullptr;
    TRITONSERVER_Error* failed = factory_ != nullptr
                                     ? TRITONBACKEND_ResponseNewFromFactory(&response, factory_)
                                     : TRITONBACKEND_ResponseNew(&response, handle_);
    if (failed == nullptr) {
      failed =
          TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, error.get());
    }
    detail::LogIfError(failed, "sending an error response");
  }

  // Runs fn(*this); an exception it throws fails this request (only) with
  // the exception's message.
  template <typename Fn>
  void Try(Fn&& fn) noexcept {
    try {
      fn(*this);
    } catch (const Error& e) {
      Fail(e);
    } catch (const std::exception& e) {
      Fail(TRITONSERVER_ERROR_INTERNAL, e.what());
    } catch (...) {
      Fail(TRITONSERVER_ERROR_INTERNAL, "unknown exception");
    }
  }

  // Once the backend is done with it (after Execute, or when a kept
  // request is destroyed), the request goes back to its scheduler instead
  // of being released, unless it was finished by then: the core's
  // TRITONSERVER_REQUEST_RELEASE_RESCHEDULE (for a sequence batcher's
  // iterative sequences). No response is due for it meanwhile.
  void SetRescheduled(bool reschedule) { rescheduled_ = reschedule; }
  bool rescheduled() const { return rescheduled_; }

  // Whether the final response (or flag) was sent.
  bool finished() const { return finished_; }
  bool failed() const { return failed_; }

  // Optional, for statistics: when this request's compute started and
  // ended (after its inputs were read, before its outputs are written).
  // Unmarked, the batch's marks or Execute's own start and end are used.
  void MarkComputeStart() { compute_start_ns_ = detail::NowNs(); }
  void MarkComputeEnd() { compute_end_ns_ = detail::NowNs(); }

 private:
  friend class Response;
  friend class Requests;
  friend struct detail::Access;

  // Hands the request back to its scheduler; false when the core refuses
  // (a scheduler that does not reschedule): the request is then failed
  // with why, for the caller to release as usual.
  bool Reschedule() noexcept {
    TRITONSERVER_Error* error =
        TRITONBACKEND_RequestRelease(handle_, TRITONSERVER_REQUEST_RELEASE_RESCHEDULE);
    if (error == nullptr) return true;
    detail::ErrorPtr owned(error);
    const std::string why =
        std::string("the request could not be rescheduled: ") + TRITONSERVER_ErrorMessage(error);
    Fail(TRITONSERVER_ERROR_UNSUPPORTED, why.c_str());
    return false;
  }

  const char* HostPolicy() const {
    const std::string& policy = instance_->host_policy();
    return policy.empty() ? nullptr : policy.c_str();
  }

  const void* FindParameter(std::string_view key, TRITONSERVER_ParameterType type) const {
    uint32_t count = 0;
    Check(TRITONBACKEND_RequestParameterCount(handle_, &count));
    for (uint32_t i = 0; i < count; ++i) {
      const char* name = nullptr;
      TRITONSERVER_ParameterType found = TRITONSERVER_PARAMETER_STRING;
      const void* value = nullptr;
      Check(TRITONBACKEND_RequestParameter(handle_, i, &name, &found, &value));
      if (name != nullptr && key == name) {
        if (found != type) {
          throw Error::InvalidArgument("request parameter '" + std::string(key) + "' is " +
                                       TRITONSERVER_ParameterTypeString(found) + ", not " +
                                       TRITONSERVER_ParameterTypeString(type));
        }
        return value;
      }
    }
    return nullptr;
  }

  void RequireOpen() const {
    if (finished_) {
      throw Error::Internal("the request already sent its final response");
    }
  }

  TRITONBACKEND_ResponseFactory* Factory() {
    if (factory_ == nullptr) {
      Check(TRITONBACKEND_ResponseFactoryNew(&factory_, handle_));
    }
    return factory_;
  }

  void MarkFinished(bool failed) noexcept {
    finished_ = true;
    failed_ = failed;
    finish_ns_ = detail::NowNs();
    // A kept request reports its statistics now: the batch that received
    // it may be long gone.
    if (kept_) ReportStatistics(default_start_ns_, finish_ns_);
  }

  // Reports the statistics of this finished request to the core. Unmarked
  // compute times default to `start` and `end` (capped by the request's own
  // end), so that exec start <= compute start <= compute end <= end.
  // Returns the compute start and end it reported.
  std::pair<uint64_t, uint64_t> ReportStatistics(uint64_t start, uint64_t end) const noexcept {
    uint64_t compute_start = compute_start_ns_ ? compute_start_ns_ : start;
    uint64_t compute_end = compute_end_ns_ ? compute_end_ns_ : end;
    if (compute_end > finish_ns_) compute_end = finish_ns_;
    if (compute_start < exec_start_ns_) compute_start = exec_start_ns_;
    if (compute_start > compute_end) compute_start = compute_end;
    detail::LogIfError(TRITONBACKEND_ModelInstanceReportStatistics(
                           instance_->handle(), handle_, !failed_, exec_start_ns_, compute_start,
                           compute_end, finish_ns_),
                       "reporting request statistics");
    return {compute_start, compute_end};
  }

  TRITONBACKEND_Request* handle_;
  Instance* instance_;
  TRITONBACKEND_ResponseFactory* factory_ = nullptr;
  bool finished_ = false;
  bool failed_ = false;
  bool kept_ = false;
  bool rescheduled_ = false;
  uint64_t finish_ns_ = 0;
  uint64_t compute_start_ns_ = 0;
  uint64_t compute_end_ns_ = 0;
  uint64_t exec_start_ns_ = 0;     // when the core handed over its batch
  uint64_t default_start_ns_ = 0;  // compute start when none was marked
};

inline void Response::Send(bool final) {
  RequireOpen();
  request_->RequireOpen();
  if (!final && !request_->model().decoupled()) {
    throw Error::Internal("model '" + request_->model().name() +
                          "' is not decoupled: its responses must be final");
  }
  CopyStaged();  // a failed copy leaves the response unsent: the request fails with it
  TRITONBACKEND_Response* response = handle_;
  handle_ = nullptr;  // the core owns it now, even if sending fails
  // A failed send leaves the request open: it is then failed with the error.
  Check(TRITONBACKEND_ResponseSend(response, final ? TRITONSERVER_RESPONSE_COMPLETE_FINAL : 0,
                                   nullptr));
  if (final) request_->MarkFinished(false);
}

inline void Response::SendError(TRITONSERVER_Error_Code code, const std::string& message,
                                bool final) {
  RequireOpen();
  request_->RequireOpen();
  if (!final && !request_->model().decoupled()) {
    throw Error::Internal("model '" + request_->model().name() +
                          "' is not decoupled: its responses must be final");
  }
  detail::ErrorPtr error(TRITONSERVER_ErrorNew(code, message.c_str()));
  TRITONBACKEND_Response* response = handle_;
  handle_ = nullptr;  // the core owns it now, even if sending fails
  Check(TRITONBACKEND_ResponseSend(response, final ? TRITONSERVER_RESPONSE_COMPLETE_FINAL : 0,
                                   error.get()));
  if (final) request_->MarkFinished(true);
}

// The requests of one Execute call. Iterate it (`for (Request& r :
// requests)`), or use ForEach to have an exception fail only the request
// that threw.
class Requests {
 public:
  using iterator = std::vector<Request*>::const_iterator;

  Requests(const Requests&) = delete;
  Requests& operator=(const Requests&) = delete;

  size_t size() const { return active_.size(); }
  bool empty() const { return active_.empty(); }
  Request& operator[](size_t i) const { return *active_[i]; }
  // Iterates Request& (not pointers).
  class Iterator {
   public:
    explicit Iterator(iterator it) : it_(it) {}
    Request& operator*() const { return **it_; }
    Request* operator->() const { return *it_; }
    Iterator& operator++() {
      ++it_;
      return *this;
    }
    bool operator!=(const Iterator& other) const { return it_ != other.it_; }
    bool operator==(const Iterator& other) const { return it_ == other.it_; }

   private:
    iterator it_;
  };
  Iterator begin() const { return Iterator(active_.begin()); }
  Iterator end() const { return Iterator(active_.end()); }

  Instance& instance() const { return *instance_; }
  Model& model() const { return instance_->model(); }

  // Calls fn(request) for each request not yet finished. An exception thrown
  // by fn fails that request with the exception's message; the others go on.
  template <typename Fn>
  void ForEach(Fn&& fn) {
    for (Request* request : active_) {
      if (!request->finished()) request->Try(fn);
    }
  }

  // The sum of the requests' batch sizes.
  uint64_t batch_size() const {
    uint64_t total = 0;
    for (const Request* request : active_) total += request->batch_size();
    return total;
  }

  // Optional, for statistics: when the batch's compute started and ended.
  void MarkComputeStart() { compute_start_ns_ = detail::NowNs(); }
  void MarkComputeEnd() { compute_end_ns_ = detail::NowNs(); }

  // Hands `request` over to the backend, for it to outlive this Execute
  // (see the top of this file). The batch forgets it: it is no longer
  // iterated, answered, reported or released by the SDK. The returned
  // Request stays valid until the backend destroys it, which releases it
  // (failing it first if it got no final response); its statistics are
  // reported when its final response is sent (at once if it was already).
  // Call it during Execute only.
  std::unique_ptr<Request> Keep(Request& request) {
    for (auto& owned : all_) {
      if (owned.get() != &request) continue;
      std::unique_ptr<Request> kept = std::move(owned);
      for (auto it = active_.begin(); it != active_.end(); ++it) {
        if (*it == &request) {
          active_.erase(it);
          break;
        }
      }
      if (!kept->failed()) {
        uint64_t size = 1;
        detail::LogIfError(Guard([&] { size = kept->batch_size(); }),
                           "reading a request's batch size");
        kept_batch_size_ += size;
      }
      kept->kept_ = true;
      kept->default_start_ns_ = compute_start_ns_ ? compute_start_ns_ : call_start_ns_;
      if (kept->finished()) {
        kept->ReportStatistics(kept->default_start_ns_, kept->finish_ns_);
      }
      return kept;
    }
    throw Error::InvalidArgument("Requests::Keep: the request is not (or no longer) in this batch");
  }

 private:
  friend struct detail::Access;
  Requests(Instance& instance, TRITONBACKEND_Request** requests, uint32_t count,
           uint64_t exec_start)
      : instance_(&instance) {
    all_.reserve(count);
    active_.reserve(count);
    for (uint32_t i = 0; i < count; ++i) {
      all_.push_back(std::make_unique<Request>(requests[i], instance));
      all_.back()->exec_start_ns_ = exec_start;
    }
  }

  Instance* instance_;
  // Heap objects, so a Response or a kept owner never sees one move; a
  // kept request's slot is null.
  std::vector<std::unique_ptr<Request>> all_;
  std::vector<Request*> active_;  // what Execute sees
  uint64_t compute_start_ns_ = 0;
  uint64_t compute_end_ns_ = 0;
  uint64_t call_start_ns_ = 0;    // when Execute was called
  uint64_t kept_batch_size_ = 0;  // of the kept requests not failed
};

}  // namespace tritonserver::backend
