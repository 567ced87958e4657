// The TRITONBACKEND_* entry points, compiled into every backend library here.
// They keep model and instance state and run each request of a batch through
// the backend's ExecuteRequest hook on its own, so one failing request does
// not fail its batch-mates.
#include <memory>
#include <string>

#include "backend_util.h"

namespace tritonserver::backends {
namespace {

void CheckApiVersion(TRITONBACKEND_Backend* backend) {
  uint32_t major = 0;
  uint32_t minor = 0;
  Check(TRITONBACKEND_ApiVersion(&major, &minor));
  if (major == TRITONBACKEND_API_VERSION_MAJOR &&
      minor >= TRITONBACKEND_API_VERSION_MINOR) {
    return;
  }
  const char* name = "?";
  LogIfError(TRITONBACKEND_BackendName(backend, &name),
             "reading the backend name");
  throw BackendError(
      TRITONSERVER_ERROR_UNSUPPORTED,
      "backend '" + std::string(name) + "' was built for TRITONBACKEND API " +
          std::to_string(TRITONBACKEND_API_VERSION_MAJOR) + "." +
          std::to_string(TRITONBACKEND_API_VERSION_MINOR) +
          " and needs a core with the same major and at least that minor "
          "version (Triton 2.51 or newer); this core has API " +
          std::to_string(major) + "." + std::to_string(minor));
}

ModelState ReadModelState(TRITONBACKEND_Model* model) {
  ModelState state;
  const char* name = nullptr;
  Check(TRITONBACKEND_ModelName(model, &name));
  state.name = name;
  const std::string config = ModelConfigJson(model);
  const std::string max_batch(JsonScalar(config, "max_batch_size"));
  state.max_batch_size = max_batch.empty() ? 0 : std::stoll(max_batch);
  const size_t policy = config.find("\"model_transaction_policy\"");
  state.decoupled = policy != std::string::npos &&
                    JsonScalar(config, "decoupled", policy) == "true";
  return state;
}

// The instance's host policy name: the first key of {"<name>": {...}}.
std::string HostPolicyName(TRITONBACKEND_ModelInstance* instance) {
  TRITONSERVER_Message* policy = nullptr;  // owned by the core
  Check(TRITONBACKEND_ModelInstanceHostPolicy(instance, &policy));
  const std::string json = MessageJson(policy);
  const size_t start = json.find('"');
  const size_t end = json.find('"', start + 1);
  if (start == std::string::npos || end == std::string::npos) return {};
  return json.substr(start + 1, end - start - 1);
}

void ExecuteAll(TRITONBACKEND_ModelInstance* instance,
                TRITONBACKEND_Request** requests, uint32_t request_count) {
  void* vstate = nullptr;
  // Throwing here is still allowed: the core keeps the untouched requests.
  Check(TRITONBACKEND_ModelInstanceState(instance, &vstate));
  const auto& state = *static_cast<const InstanceState*>(vstate);

  // From here on nothing throws: each request is answered, then released.
  const uint64_t exec_start_ns = NowNs();
  uint64_t batch_size = 0;
  uint64_t compute_start_ns = 0;
  uint64_t compute_end_ns = 0;
  for (uint32_t i = 0; i < request_count; ++i) {
    TRITONBACKEND_Request* request = requests[i];
    RequestContext ctx(state, request);
    uint64_t size = 0;
    ErrorPtr error(Guard([&] {
      bool cancelled = false;
      Check(TRITONBACKEND_RequestIsCancelled(request, &cancelled));
      if (cancelled) {
        throw BackendError(TRITONSERVER_ERROR_CANCELLED,
                           "request was cancelled");
      }
      size = ctx.BatchSize();
      ExecuteRequest(ctx);
      if (!ctx.final_sent()) {
        throw BackendError(TRITONSERVER_ERROR_INTERNAL,
                           "backend returned without a final response");
      }
    }));
    const uint64_t end_ns = NowNs();
    if (error != nullptr) ctx.SendError(error.get());
    LogIfError(TRITONBACKEND_ModelInstanceReportStatistics(
                   instance, request, error == nullptr, ctx.exec_start_ns(),
                   ctx.compute_start_ns(), ctx.compute_end_ns(end_ns), end_ns),
               "reporting request statistics");
    LogIfError(
        TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL),
        "releasing a request");
    if (error == nullptr) {
      batch_size += size;
      if (compute_start_ns == 0) compute_start_ns = ctx.compute_start_ns();
      compute_end_ns = ctx.compute_end_ns(end_ns);
    }
  }
  // Only requests that succeeded count towards the executed batch.
  if (batch_size > 0) {
    LogIfError(TRITONBACKEND_ModelInstanceReportBatchStatistics(
                   instance, batch_size, exec_start_ns, compute_start_ns,
                   compute_end_ns, NowNs()),
               "reporting batch statistics");
  }
}

}  // namespace
}  // namespace tritonserver::backends

namespace tb = tritonserver::backends;

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  return tb::Guard([&] { tb::CheckApiVersion(backend); });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  return tb::Guard([&] {
    auto state = std::make_unique<tb::ModelState>(tb::ReadModelState(model));
    tb::ValidateModel(*state);
    tb::Check(TRITONBACKEND_ModelSetState(model, state.get()));
    state.release();  // now the model's, until ModelFinalize
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  return tb::Guard([&] {
    void* state = nullptr;
    tb::Check(TRITONBACKEND_ModelState(model, &state));
    delete static_cast<tb::ModelState*>(state);
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance* instance) {
  return tb::Guard([&] {
    TRITONBACKEND_Model* model = nullptr;
    void* model_state = nullptr;
    tb::Check(TRITONBACKEND_ModelInstanceModel(instance, &model));
    tb::Check(TRITONBACKEND_ModelState(model, &model_state));
    auto state = std::make_unique<tb::InstanceState>();
    state->model = static_cast<const tb::ModelState*>(model_state);
    state->host_policy = tb::HostPolicyName(instance);
    tb::Check(TRITONBACKEND_ModelInstanceSetState(instance, state.get()));
    state.release();  // now the instance's, until ModelInstanceFinalize
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance* instance) {
  return tb::Guard([&] {
    void* state = nullptr;
    tb::Check(TRITONBACKEND_ModelInstanceState(instance, &state));
    delete static_cast<tb::InstanceState*>(state);
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count) {
  return tb::Guard([&] { tb::ExecuteAll(instance, requests, request_count); });
}

}  // extern "C"
