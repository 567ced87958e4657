// The tritonserver backend SDK: write a Triton backend as one C++17 class.
//
//   #include <tritonserver/backend.h>
//   namespace tb = tritonserver::backend;
//
//   class Doubler : public tb::Backend {
//    public:
//     void Execute(tb::Instance& instance, tb::Requests& requests) override {
//       requests.ForEach([](tb::Request& request) {
//         std::vector<float> x = request.Input("IN").Values<float>();
//         for (float& v : x) v *= 2;
//         tb::Response response = request.NewResponse();
//         response.SetOutput("OUT", {int64_t(x.size())}, x);
//         response.Send();
//       });
//     }
//   };
//   TRITONSERVER_BACKEND(Doubler)
//
// Execute is the one required method. The other hooks (Initialize/Finalize
// for the backend, ModelInitialize/ModelFinalize, InstanceInitialize/
// InstanceFinalize) do nothing unless overridden. TRITONSERVER_BACKEND
// exports the seven TRITONBACKEND_* entry points the core looks up.
//
// What the SDK guarantees (docs/backends.md has the full list):
//  - the core's backend API version is checked at Initialize;
//  - one Backend object per backend, one Model per model load, one Instance
//    per model instance, each deleted in its Finalize; a Finalize hook runs
//    only if the matching Initialize hook succeeded;
//  - an exception thrown by any hook becomes a TRITONSERVER_Error with its
//    message (a failing Initialize hook makes the model's load fail);
//  - every request is answered with exactly one final response and released
//    exactly once; one that Execute left unanswered is failed (with the
//    exception Execute threw, if it threw); a request cancelled before its
//    batch ran is failed CANCELLED without reaching Execute; a request the
//    backend keeps past Execute (Requests::Keep) is released when the backend
//    destroys it, failed first if it was never answered;
//  - per-request and per-batch statistics are reported to the core.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "tritonserver/backend/error.h"
#include "tritonserver/backend/json.h"
#include "tritonserver/backend/marker.h"
#include "tritonserver/backend/model.h"
#include "tritonserver/backend/request.h"
#include "tritonserver/backend/tensor.h"

// The TRITONBACKEND API version a backend needs from the core, checked at
// Initialize: by default that of the headers (1.19, Triton 2.51). A backend
// that needs a newer core defines a higher minor before including this file.
#ifndef TRITONSERVER_BACKEND_SDK_API_MAJOR
#define TRITONSERVER_BACKEND_SDK_API_MAJOR TRITONBACKEND_API_VERSION_MAJOR
#endif
#ifndef TRITONSERVER_BACKEND_SDK_API_MINOR
#define TRITONSERVER_BACKEND_SDK_API_MINOR TRITONBACKEND_API_VERSION_MINOR
#endif

namespace tritonserver::backend {

// Derive from Backend, override Execute (and any hook you need), and name
// the class in TRITONSERVER_BACKEND. The object is created when the core
// loads the backend and shared by every model and instance using it:
// Execute runs concurrently for different instances, so guard what they
// share.
class Backend {
 public:
  virtual ~Backend() = default;

  // Once per backend (process-wide), before its first model loads.
  virtual void Initialize() {}
  // Once, when the core unloads the backend.
  virtual void Finalize() {}
  // Once per model load, before its instances; throw to refuse the model.
  virtual void ModelInitialize(Model& /*model*/) {}
  // Once per model unload, after its instances were finalized.
  virtual void ModelFinalize(Model& /*model*/) {}
  // Once per model instance.
  virtual void InstanceInitialize(Instance& /*instance*/) {}
  // Once per model instance, when the model unloads.
  virtual void InstanceFinalize(Instance& /*instance*/) {}
  // One batch of requests on one instance (never two at once per instance).
  virtual void Execute(Instance& instance, Requests& requests) = 0;

  TRITONBACKEND_Backend* handle() const { return handle_; }
  // The backend's name (its folder and libtriton_<name>.so).
  const std::string& name() const { return name_; }
  // The backend's configuration: {"cmdline": {"<setting>": "<value>"}, ...},
  // parsed and as the core's text.
  const Json& config() const { return config_; }
  const std::string& config_text() const { return config_text_; }
  // A setting given to the server for this backend (the Python API's
  // Options.backend_configuration[name][key]).
  std::optional<std::string> Setting(std::string_view key) const {
    const Json& value = config_["cmdline"][key];
    if (!value.is_string()) return std::nullopt;
    return value.AsString();
  }

 private:
  friend struct detail::Access;
  TRITONBACKEND_Backend* handle_ = nullptr;
  std::string name_;
  std::string config_text_;
  Json config_;
};

}  // namespace tritonserver::backend

// The instances behind one core instance (needs Backend, above).
#include "tritonserver/backend/workers.h"

namespace tritonserver::backend {
namespace detail {

struct Access {
  static void Attach(Backend& backend, TRITONBACKEND_Backend* handle) {
    backend.handle_ = handle;
    const char* name = nullptr;
    Check(TRITONBACKEND_BackendName(handle, &name));
    backend.name_ = name;
    TRITONSERVER_Message* config = nullptr;  // owned by the core
    Check(TRITONBACKEND_BackendConfig(handle, &config));
    backend.config_text_ = MessageJson(config);
    backend.config_ = Json::Parse(backend.config_text_);
  }

  static std::unique_ptr<Requests> MakeRequests(Instance& instance,
                                                TRITONBACKEND_Request** requests, uint32_t count,
                                                uint64_t exec_start) {
    return std::unique_ptr<Requests>(new Requests(instance, requests, count, exec_start));
  }
  static std::vector<std::unique_ptr<Request>>& All(Requests& r) { return r.all_; }
  static std::vector<Request*>& Active(Requests& r) { return r.active_; }
  static void SetCallStart(Requests& r, uint64_t t) { r.call_start_ns_ = t; }
  static uint64_t ComputeStart(const Requests& r) { return r.compute_start_ns_; }
  static uint64_t ComputeEnd(const Requests& r) { return r.compute_end_ns_; }
  static uint64_t KeptBatchSize(const Requests& r) { return r.kept_batch_size_; }
  static bool Reschedule(Request& r) { return r.Reschedule(); }
  static std::pair<uint64_t, uint64_t> Report(const Request& r, uint64_t start, uint64_t end) {
    return r.ReportStatistics(start, end);
  }
};

inline void CheckApiVersion(TRITONBACKEND_Backend* backend) {
  constexpr uint32_t kMajor = TRITONSERVER_BACKEND_SDK_API_MAJOR;
  constexpr uint32_t kMinor = TRITONSERVER_BACKEND_SDK_API_MINOR;
  uint32_t major = 0;
  uint32_t minor = 0;
  Check(TRITONBACKEND_ApiVersion(&major, &minor));
  if (major == kMajor && minor >= kMinor) return;
  const char* name = "?";
  LogIfError(TRITONBACKEND_BackendName(backend, &name), "reading the backend name");
  const std::string needs = std::to_string(kMajor) + "." + std::to_string(kMinor);
  throw Error::Unsupported(
      "backend '" + std::string(name) + "' needs TRITONBACKEND API " + needs +
      " (a Triton core with API major version " + std::to_string(kMajor) + " and minor " +
      std::to_string(kMinor) + " or newer), but the running core has API " + std::to_string(major) +
      "." + std::to_string(minor) + ": use a newer core or rebuild the backend against this one");
}

template <typename T, typename Handle>
T* StateOf(Handle* handle, TRITONSERVER_Error* (*get)(Handle*, void**)) {
  void* state = nullptr;
  Check(get(handle, &state));
  return static_cast<T*>(state);
}

inline Backend& BackendOf(TRITONBACKEND_Model* model) {
  TRITONBACKEND_Backend* handle = nullptr;
  Check(TRITONBACKEND_ModelBackend(model, &handle));
  Backend* backend = StateOf<Backend>(handle, &TRITONBACKEND_BackendState);
  if (backend == nullptr) {
    throw Error::Internal("the backend was not initialized by this SDK");
  }
  return *backend;
}

// ---- The seven entry points (TRITONSERVER_BACKEND calls these) -------------

using BackendFactory = std::unique_ptr<Backend> (*)();

inline TRITONSERVER_Error* Initialize(TRITONBACKEND_Backend* handle, BackendFactory make) noexcept {
  return Guard([&] {
    CheckApiVersion(handle);
    std::unique_ptr<Backend> backend = make();
    Access::Attach(*backend, handle);
    backend->Initialize();
    Check(TRITONBACKEND_BackendSetState(handle, backend.get()));
    backend.release();  // the core's until Finalize
  });
}

inline TRITONSERVER_Error* Finalize(TRITONBACKEND_Backend* handle) noexcept {
  std::unique_ptr<Backend> backend;
  if (TRITONSERVER_Error* error =
          Guard([&] { backend.reset(StateOf<Backend>(handle, &TRITONBACKEND_BackendState)); })) {
    return error;
  }
  if (backend == nullptr) return nullptr;  // Initialize failed
  TRITONSERVER_Error* error = Guard([&] { backend->Finalize(); });
  LogIfError(TRITONBACKEND_BackendSetState(handle, nullptr), "clearing the backend state");
  return error;  // `backend` is deleted here
}

inline TRITONSERVER_Error* ModelInitialize(TRITONBACKEND_Model* handle) noexcept {
  return Guard([&] {
    Backend& backend = BackendOf(handle);
    auto model = std::make_unique<Model>(handle, backend);
    backend.ModelInitialize(*model);
    Check(TRITONBACKEND_ModelSetState(handle, model.get()));
    model.release();  // the core's until ModelFinalize
  });
}

inline TRITONSERVER_Error* ModelFinalize(TRITONBACKEND_Model* handle) noexcept {
  std::unique_ptr<Model> model;
  if (TRITONSERVER_Error* error =
          Guard([&] { model.reset(StateOf<Model>(handle, &TRITONBACKEND_ModelState)); })) {
    return error;
  }
  if (model == nullptr) return nullptr;  // ModelInitialize failed
  TRITONSERVER_Error* error = Guard([&] { model->backend().ModelFinalize(*model); });
  LogIfError(TRITONBACKEND_ModelSetState(handle, nullptr), "clearing the model state");
  return error;
}

inline void RunBatch(Instance& instance, Requests& batch, uint64_t exec_start) noexcept;

inline TRITONSERVER_Error* InstanceInitialize(TRITONBACKEND_ModelInstance* handle) noexcept {
  return Guard([&] {
    TRITONBACKEND_Model* model_handle = nullptr;
    Check(TRITONBACKEND_ModelInstanceModel(handle, &model_handle));
    Model* model = StateOf<Model>(model_handle, &TRITONBACKEND_ModelState);
    if (model == nullptr) {
      throw Error::Internal("the model was not initialized by this SDK");
    }
    auto set = std::make_unique<InstanceSet>(handle, *model);  // the backend's hooks
    set->StartWorkers(&RunBatch);
    if (TRITONSERVER_Error* error = TRITONBACKEND_ModelInstanceSetState(handle, set.get())) {
      LogIfError(set->Finalize(), "finalizing an instance the core did not take");
      Check(error);
    }
    set.release();  // the core's until ModelInstanceFinalize
  });
}

inline TRITONSERVER_Error* InstanceFinalize(TRITONBACKEND_ModelInstance* handle) noexcept {
  std::unique_ptr<InstanceSet> set;
  if (TRITONSERVER_Error* error = Guard(
          [&] { set.reset(StateOf<InstanceSet>(handle, &TRITONBACKEND_ModelInstanceState)); })) {
    return error;
  }
  if (set == nullptr) return nullptr;  // InstanceInitialize failed
  TRITONSERVER_Error* error = set->Finalize();
  LogIfError(TRITONBACKEND_ModelInstanceSetState(handle, nullptr), "clearing the instance state");
  return error;
}

// Answers and reports each request the backend did not keep, once Execute
// is done, reports the batch, and then releases the requests: nothing of
// the instance is touched after the last release (the core may unload the
// model as soon as its last request is released).
inline void Complete(Instance& instance, Requests& batch, uint64_t exec_start, uint64_t call_start,
                     uint64_t call_end, const std::optional<Error>& thrown) noexcept {
  const uint64_t start = Access::ComputeStart(batch) ? Access::ComputeStart(batch) : call_start;
  const uint64_t end = Access::ComputeEnd(batch) ? Access::ComputeEnd(batch) : call_end;
  // Kept requests count as computed over the whole call.
  uint64_t batch_size = Access::KeptBatchSize(batch);
  uint64_t first_compute = batch_size > 0 ? start : 0;
  uint64_t last_compute = batch_size > 0 ? end : 0;
  for (std::unique_ptr<Request>& owned : Access::All(batch)) {
    if (owned == nullptr) continue;  // kept by the backend
    Request& request = *owned;
    if (request.rescheduled() && !request.finished() && !thrown.has_value() &&
        Access::Reschedule(request)) {
      owned.reset();  // back with its scheduler: neither answered nor reported here
      continue;
    }
    if (!request.finished()) {
      if (thrown.has_value()) {
        request.Fail(*thrown);
      } else {
        request.Fail(TRITONSERVER_ERROR_INTERNAL,
                     "the backend returned from Execute without sending a "
                     "final response for this request");
      }
    }
    const auto [compute_start, compute_end] = Access::Report(request, start, end);
    if (!request.failed()) {
      uint64_t size = 1;
      TRITONSERVER_Error* error = Guard([&] { size = request.batch_size(); });
      LogIfError(error, "reading a request's batch size");
      batch_size += size;
      if (first_compute == 0 || compute_start < first_compute) {
        first_compute = compute_start;
      }
      if (compute_end > last_compute) last_compute = compute_end;
    }
  }
  // The batch is what the instance computed: the requests that succeeded.
  if (batch_size > 0) {
    LogIfError(TRITONBACKEND_ModelInstanceReportBatchStatistics(
                   instance.handle(), batch_size, exec_start, first_compute, last_compute, NowNs()),
               "reporting batch statistics");
  }
  for (std::unique_ptr<Request>& owned : Access::All(batch)) {
    if (owned == nullptr) continue;
    LogIfError(TRITONBACKEND_RequestRelease(owned->handle(), TRITONSERVER_REQUEST_RELEASE_ALL),
               "releasing a request");
  }
}

// Runs one batch on `instance`: fails what cannot run, calls the backend's
// Execute on the rest, then completes the batch (above).
inline void RunBatch(Instance& instance, Requests& batch, uint64_t exec_start) noexcept {
  for (std::unique_ptr<Request>& request : Access::All(batch)) {
    bool cancelled = false;
    LogIfError(TRITONBACKEND_RequestIsCancelled(request->handle(), &cancelled),
               "checking for cancellation");
    bool empty = false;
    LogIfError(Guard([&] { empty = request->empty_batch(); }), "reading a request's inputs");
    if (cancelled) {
      request->Fail(TRITONSERVER_ERROR_CANCELLED,
                    "the request was cancelled before it was executed");
    } else if (empty) {
      // As Triton's own backends: a batch of no items is refused, never
      // answered with outputs that lost their batch dimension.
      request->Fail(TRITONSERVER_ERROR_INVALID_ARG,
                    "the request's batch is empty (its first dimension is 0): a request to a "
                    "batching model must hold at least one batch item");
    } else {
      Access::Active(batch).push_back(request.get());  // reserved: no throw
    }
  }
  std::optional<Error> thrown;
  const uint64_t call_start = NowNs();
  Access::SetCallStart(batch, call_start);
  if (!batch.empty()) {
    if (TRITONSERVER_Error* error =
            Guard([&] { instance.model().backend().Execute(instance, batch); })) {
      ErrorPtr owned(error);
      try {
        thrown.emplace(TRITONSERVER_ErrorCode(error), TRITONSERVER_ErrorMessage(error));
      } catch (...) {  // out of memory: the requests still get an error
      }
    }
  }
  Complete(instance, batch, exec_start, call_start, NowNs(), thrown);
}

inline TRITONSERVER_Error* InstanceExecute(TRITONBACKEND_ModelInstance* handle,
                                           TRITONBACKEND_Request** requests,
                                           uint32_t count) noexcept {
  const uint64_t exec_start = NowNs();
  InstanceSet* set = nullptr;
  WorkerPool* pool = nullptr;
  size_t worker = 0;
  bool reserved = false;
  std::unique_ptr<Requests> batch;
  // Until the batch exists nothing has touched the requests: an error
  // returned here leaves them to the core, which fails them.
  if (TRITONSERVER_Error* error = Guard([&] {
        set = StateOf<InstanceSet>(handle, &TRITONBACKEND_ModelInstanceState);
        if (set == nullptr) {
          throw Error::Internal("the instance was not initialized by this SDK");
        }
        pool = set->pool();
        if (pool != nullptr) {
          worker = pool->Acquire();  // waits for a free worker
          reserved = true;
        }
        batch = Access::MakeRequests(set->instance(worker), requests, count, exec_start);
      })) {
    if (reserved) pool->Cancel(worker);
    return error;
  }
  // From here on the requests are ours; nothing below throws.
  if (pool != nullptr) {
    pool->Start(worker, Job{std::move(batch), exec_start});
  } else {
    RunBatch(set->instance(0), *batch, exec_start);
  }
  return nullptr;
}

}  // namespace detail
}  // namespace tritonserver::backend

// Exports the seven TRITONBACKEND_* entry points for the Backend subclass
// `BackendClass` (default-constructible). Use it once per backend library,
// at namespace scope.
#define TRITONSERVER_BACKEND(BackendClass)                                                         \
  static_assert(std::is_base_of_v<::tritonserver::backend::Backend, BackendClass>,                 \
                "TRITONSERVER_BACKEND: " #BackendClass                                             \
                " must derive from tritonserver::backend::Backend");                               \
  static_assert(std::is_default_constructible_v<BackendClass>,                                     \
                "TRITONSERVER_BACKEND: " #BackendClass " needs a default constructor");            \
  TRITONSERVER_BACKEND_SDK_MARKER();                                                               \
  extern "C" {                                                                                     \
  TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Initialize(                                \
      TRITONBACKEND_Backend* backend) {                                                            \
    return ::tritonserver::backend::detail::Initialize(                                            \
        backend, []() -> std::unique_ptr<::tritonserver::backend::Backend> {                       \
          return std::make_unique<BackendClass>();                                                 \
        });                                                                                        \
  }                                                                                                \
  TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend) { \
    return ::tritonserver::backend::detail::Finalize(backend);                                     \
  }                                                                                                \
  TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(                           \
      TRITONBACKEND_Model* model) {                                                                \
    return ::tritonserver::backend::detail::ModelInitialize(model);                                \
  }                                                                                                \
  TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(                             \
      TRITONBACKEND_Model* model) {                                                                \
    return ::tritonserver::backend::detail::ModelFinalize(model);                                  \
  }                                                                                                \
  TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(                   \
      TRITONBACKEND_ModelInstance* instance) {                                                     \
    return ::tritonserver::backend::detail::InstanceInitialize(instance);                          \
  }                                                                                                \
  TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(                     \
      TRITONBACKEND_ModelInstance* instance) {                                                     \
    return ::tritonserver::backend::detail::InstanceFinalize(instance);                            \
  }                                                                                                \
  TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(                      \
      TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,                     \
      const uint32_t request_count) {                                                              \
    return ::tritonserver::backend::detail::InstanceExecute(instance, requests, request_count);    \
  }                                                                                                \
  }
