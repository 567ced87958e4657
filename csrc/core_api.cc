#include "core_api.h"

#include <dlfcn.h>

#include <mutex>

#include "bindings/errors.h"

namespace tritonpy {
namespace {

CoreApi g_api;
std::string g_path;
bool g_loaded = false;
std::mutex g_mutex;

}  // namespace

void LoadCore(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_loaded) {
    if (path == g_path) return;
    throw Error(
        TRITONSERVER_ERROR_ALREADY_EXISTS,
        "a Triton core is already loaded from " + g_path + "; one process can use only one core");
  }
  // RTLD_LOCAL keeps the core's vendored libraries (OpenSSL, curl...) out of
  // the global namespace, where they would shadow the system's for modules
  // imported later. The handle is never closed: the core cannot unload.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw Error(TRITONSERVER_ERROR_UNAVAILABLE, "cannot load the Triton core " + path + ": " +
                                                    (why ? why : "unknown dlopen error"));
  }
  CoreApi api;
#define X(name) api.name = reinterpret_cast<decltype(&::name)>(dlsym(handle, #name));
#include "core_functions.def"
#undef X
  if (api.TRITONSERVER_ApiVersion == nullptr || api.TRITONSERVER_ServerNew == nullptr ||
      api.TRITONSERVER_ErrorMessage == nullptr) {
    throw Error(TRITONSERVER_ERROR_UNAVAILABLE, path + " does not export the Triton server C API");
  }
  g_api = api;
  g_path = path;
  g_loaded = true;
}

bool CoreLoaded() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_loaded;
}

std::string CorePath() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_path;
}

const CoreApi& Core() {
  // g_loaded only goes from false to true, under the mutex, before any
  // caller can hold a handle; reading it unlocked afterwards is safe enough
  // for a flag that never goes back.
  if (!g_loaded) {
    throw Error(TRITONSERVER_ERROR_UNAVAILABLE, "the Triton core is not loaded yet");
  }
  return g_api;
}

std::string MissingFunctions() {
  const CoreApi& api = Core();
  std::string out;
#define X(name)                   \
  if (api.name == nullptr) {      \
    if (!out.empty()) out += ","; \
    out += #name;                 \
  }
#include "core_functions.def"
#undef X
  return out;
}

bool ForgetFunction(const std::string& name) {
  std::lock_guard<std::mutex> lock(g_mutex);
#define X(fn)           \
  if (name == #fn) {    \
    g_api.fn = nullptr; \
    return true;        \
  }
#include "core_functions.def"
#undef X
  return false;
}

void ThrowMissingFunction(const char* name) {
  throw Error(TRITONSERVER_ERROR_UNSUPPORTED,
              std::string(name) + " is not available in the loaded " + "Triton core (" + g_path +
                  "); a newer core is needed");
}

}  // namespace tritonpy
