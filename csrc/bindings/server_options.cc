#include "bindings/server_options.h"

#include <string>
#include <type_traits>

#include "bindings/errors.h"
#include "core_api.h"

namespace py = pybind11;

namespace tritonpy {

ServerOptions::ServerOptions() { Check(TRITON_FN(TRITONSERVER_ServerOptionsNew)(&options_)); }

ServerOptions::~ServerOptions() {
  if (options_ != nullptr) {
    ErrorPtr ignored(Core().TRITONSERVER_ServerOptionsDelete(options_));
  }
}

namespace {

// How Python passes one argument of a C setter: C strings as str, enums as
// int, everything else as itself.
template <typename C, typename = void>
struct Arg {
  using Py = C;
  static C ToC(const Py& v) { return v; }
};
template <>
struct Arg<const char*> {
  using Py = std::string;
  static const char* ToC(const Py& v) { return CString(v, "option text"); }
};
template <typename C>
struct Arg<C, std::enable_if_t<std::is_enum_v<C>>> {
  using Py = int;
  static C ToC(Py v) { return static_cast<C>(v); }
};

using Class = py::class_<ServerOptions>;
template <typename... C>
using Setter = TRITONSERVER_Error* (*CoreApi::*)(TRITONSERVER_ServerOptions*, C...);

// Binds `name` to the core function `c_name` (the table's `member`), with
// Python arguments named by `names`.
template <typename... C, typename... Names>
void Bind(Class& cls, const char* name, Setter<C...> member, const char* c_name, Names... names) {
  cls.def(
      name,
      [member, c_name](ServerOptions& o, typename Arg<C>::Py... args) {
        Check(Need(Core().*member, c_name)(o.get(), Arg<C>::ToC(args)...));
      },
      py::arg(names)...);
}

}  // namespace

// One setter per C function the Options fields use, named after it without
// its prefix. tritonserver/_options.py is the table of fields: each names
// its setter, and tests/binding check that the two agree both ways. Values
// are validated in Python before they get here; the core validates again.
void RegisterServerOptions(py::module_& m) {
  Class cls(m, "ServerOptions",
            "TRITONSERVER_ServerOptions: one owner, one setter per C function.");
  cls.def(py::init<>());
#define SETTER(name, suffix, ...)                               \
  Bind(cls, name, &CoreApi::TRITONSERVER_ServerOptions##suffix, \
       "TRITONSERVER_ServerOptions" #suffix, __VA_ARGS__)
  SETTER("set_server_id", SetServerId, "server_id");
  SETTER("set_model_repository_path", SetModelRepositoryPath, "path");
  // Also recorded: a server that polls keeps no requests (request_pool.h).
  cls.def(
      "set_model_control_mode",
      [](ServerOptions& o, int mode) {
        Check(TRITON_FN(TRITONSERVER_ServerOptionsSetModelControlMode)(
            o.get(), static_cast<TRITONSERVER_ModelControlMode>(mode)));
        o.set_polls(mode == TRITONSERVER_MODEL_CONTROL_POLL);
      },
      py::arg("mode"));
  SETTER("set_startup_model", SetStartupModel, "model_name");
  SETTER("set_strict_model_config", SetStrictModelConfig, "strict");
  SETTER("set_model_config_name", SetModelConfigName, "model_config_name");
  SETTER("set_rate_limiter_mode", SetRateLimiterMode, "mode");
  SETTER("add_rate_limiter_resource", AddRateLimiterResource, "name", "count", "device");
  SETTER("set_pinned_memory_pool_byte_size", SetPinnedMemoryPoolByteSize, "size");
  SETTER("set_cuda_memory_pool_byte_size", SetCudaMemoryPoolByteSize, "device", "size");
  SETTER("set_cache_config", SetCacheConfig, "cache_name", "config_json");
  SETTER("set_cache_directory", SetCacheDirectory, "path");
  SETTER("set_min_supported_compute_capability", SetMinSupportedComputeCapability, "capability");
  SETTER("set_exit_on_error", SetExitOnError, "exit");
  SETTER("set_strict_readiness", SetStrictReadiness, "strict");
  SETTER("set_exit_timeout", SetExitTimeout, "timeout_s");
  SETTER("set_buffer_manager_thread_count", SetBufferManagerThreadCount, "count");
  SETTER("set_model_load_thread_count", SetModelLoadThreadCount, "count");
  SETTER("set_model_load_retry_count", SetModelLoadRetryCount, "count");
  SETTER("set_model_namespacing", SetModelNamespacing, "enabled");
  SETTER("set_log_file", SetLogFile, "path");
  SETTER("set_log_info", SetLogInfo, "enabled");
  SETTER("set_log_warn", SetLogWarn, "enabled");
  SETTER("set_log_error", SetLogError, "enabled");
  SETTER("set_log_format", SetLogFormat, "format");
  SETTER("set_log_verbose", SetLogVerbose, "level");
  SETTER("set_metrics", SetMetrics, "enabled");
  SETTER("set_gpu_metrics", SetGpuMetrics, "enabled");
  SETTER("set_cpu_metrics", SetCpuMetrics, "enabled");
  SETTER("set_metrics_interval", SetMetricsInterval, "interval_ms");
  SETTER("set_backend_directory", SetBackendDirectory, "path");
  SETTER("set_repo_agent_directory", SetRepoAgentDirectory, "path");
  SETTER("set_model_load_device_limit", SetModelLoadDeviceLimit, "kind", "device", "fraction");
  SETTER("set_backend_config", SetBackendConfig, "backend_name", "setting", "value");
  SETTER("set_host_policy", SetHostPolicy, "policy_name", "setting", "value");
  SETTER("set_metrics_config", SetMetricsConfig, "name", "setting", "value");
#undef SETTER
}

}  // namespace tritonpy
