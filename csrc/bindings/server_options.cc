#include "bindings/server_options.h"

#include <string>

#include "bindings/errors.h"
#include "core_api.h"

namespace py = pybind11;

namespace tritonpy {

ServerOptions::ServerOptions() {
  Check(TRITON_FN(TRITONSERVER_ServerOptionsNew)(&options_));
}

ServerOptions::~ServerOptions() {
  if (options_ != nullptr) {
    ErrorPtr ignored(Core().TRITONSERVER_ServerOptionsDelete(options_));
  }
}

namespace {

using Opts = ServerOptions;
using Str = const std::string&;

}  // namespace

// Each setter is named after the C function it calls, without the prefix.
// Values are validated in Python (tritonserver/_options.py) before they get
// here; the core validates them again.
void RegisterServerOptions(py::module_& m) {
  py::class_<ServerOptions>(m, "ServerOptions")
      .def(py::init<>())
      .def("set_server_id", [](Opts& o, Str v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetServerId)(o.get(), v.c_str()));
      })
      .def("set_model_repository_path", [](Opts& o, Str v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetModelRepositoryPath)(o.get(), v.c_str()));
      })
      .def("set_model_control_mode", [](Opts& o, int v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetModelControlMode)(
            o.get(), static_cast<TRITONSERVER_ModelControlMode>(v)));
      })
      .def("set_startup_model", [](Opts& o, Str v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetStartupModel)(o.get(), v.c_str()));
      })
      .def("set_strict_model_config", [](Opts& o, bool v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetStrictModelConfig)(o.get(), v));
      })
      .def("set_model_config_name", [](Opts& o, Str v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetModelConfigName)(o.get(), v.c_str()));
      })
      .def("set_rate_limiter_mode", [](Opts& o, int v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetRateLimiterMode)(
            o.get(), static_cast<TRITONSERVER_RateLimitMode>(v)));
      })
      .def("add_rate_limiter_resource", [](Opts& o, Str name, size_t count, int device) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsAddRateLimiterResource)(
            o.get(), name.c_str(), count, device));
      })
      .def("set_pinned_memory_pool_byte_size", [](Opts& o, uint64_t v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetPinnedMemoryPoolByteSize)(o.get(), v));
      })
      .def("set_cuda_memory_pool_byte_size", [](Opts& o, int device, uint64_t v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetCudaMemoryPoolByteSize)(o.get(), device, v));
      })
      .def("set_cuda_virtual_address_size", [](Opts& o, int device, size_t v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetCudaVirtualAddressSize)(o.get(), device, v));
      })
      .def("set_cache_config", [](Opts& o, Str name, Str json) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetCacheConfig)(o.get(), name.c_str(), json.c_str()));
      })
      .def("set_cache_directory", [](Opts& o, Str v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetCacheDirectory)(o.get(), v.c_str()));
      })
      .def("set_min_supported_compute_capability", [](Opts& o, double v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetMinSupportedComputeCapability)(o.get(), v));
      })
      .def("set_exit_on_error", [](Opts& o, bool v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetExitOnError)(o.get(), v));
      })
      .def("set_strict_readiness", [](Opts& o, bool v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetStrictReadiness)(o.get(), v));
      })
      .def("set_exit_timeout", [](Opts& o, unsigned int v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetExitTimeout)(o.get(), v));
      })
      .def("set_buffer_manager_thread_count", [](Opts& o, unsigned int v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetBufferManagerThreadCount)(o.get(), v));
      })
      .def("set_model_load_thread_count", [](Opts& o, unsigned int v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetModelLoadThreadCount)(o.get(), v));
      })
      .def("set_model_load_retry_count", [](Opts& o, unsigned int v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetModelLoadRetryCount)(o.get(), v));
      })
      .def("set_model_namespacing", [](Opts& o, bool v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetModelNamespacing)(o.get(), v));
      })
      .def("set_enable_peer_access", [](Opts& o, bool v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetEnablePeerAccess)(o.get(), v));
      })
      .def("set_log_file", [](Opts& o, Str v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetLogFile)(o.get(), v.c_str()));
      })
      .def("set_log_info", [](Opts& o, bool v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetLogInfo)(o.get(), v));
      })
      .def("set_log_warn", [](Opts& o, bool v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetLogWarn)(o.get(), v));
      })
      .def("set_log_error", [](Opts& o, bool v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetLogError)(o.get(), v));
      })
      .def("set_log_format", [](Opts& o, int v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetLogFormat)(
            o.get(), static_cast<TRITONSERVER_LogFormat>(v)));
      })
      .def("set_log_verbose", [](Opts& o, int v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetLogVerbose)(o.get(), v));
      })
      .def("set_metrics", [](Opts& o, bool v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetMetrics)(o.get(), v));
      })
      .def("set_gpu_metrics", [](Opts& o, bool v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetGpuMetrics)(o.get(), v));
      })
      .def("set_cpu_metrics", [](Opts& o, bool v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetCpuMetrics)(o.get(), v));
      })
      .def("set_metrics_interval", [](Opts& o, uint64_t v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetMetricsInterval)(o.get(), v));
      })
      .def("set_backend_directory", [](Opts& o, Str v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetBackendDirectory)(o.get(), v.c_str()));
      })
      .def("set_repo_agent_directory", [](Opts& o, Str v) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetRepoAgentDirectory)(o.get(), v.c_str()));
      })
      .def("set_model_load_device_limit", [](Opts& o, int kind, int device, double fraction) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetModelLoadDeviceLimit)(
            o.get(), static_cast<TRITONSERVER_InstanceGroupKind>(kind), device, fraction));
      })
      .def("set_backend_config", [](Opts& o, Str backend, Str setting, Str value) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetBackendConfig)(
            o.get(), backend.c_str(), setting.c_str(), value.c_str()));
      })
      .def("set_host_policy", [](Opts& o, Str policy, Str setting, Str value) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetHostPolicy)(
            o.get(), policy.c_str(), setting.c_str(), value.c_str()));
      })
      .def("set_metrics_config", [](Opts& o, Str name, Str setting, Str value) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetMetricsConfig)(
            o.get(), name.c_str(), setting.c_str(), value.c_str()));
      });
}

}  // namespace tritonpy
