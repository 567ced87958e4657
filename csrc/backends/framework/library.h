// A backend library that hands the core's calls to another backend library:
// its seven entry points (and the optional backend-attribute one) resolved
// from a file opened by path. Used by framework/forward.cc (the framework
// backends and the in-process python slot, onto libtriton_inprocess.so) and
// stub_guard/stub_guard.cc (the python backend's stub library, behind the
// checks of a 2026 python backend).
#pragma once

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <string>

#include "triton/tritonbackend.h"

namespace tritonserver_forward {

struct Entries {
  decltype(&TRITONBACKEND_Initialize) initialize = nullptr;
  decltype(&TRITONBACKEND_Finalize) finalize = nullptr;
  decltype(&TRITONBACKEND_ModelInitialize) model_initialize = nullptr;
  decltype(&TRITONBACKEND_ModelFinalize) model_finalize = nullptr;
  decltype(&TRITONBACKEND_ModelInstanceInitialize) instance_initialize = nullptr;
  decltype(&TRITONBACKEND_ModelInstanceFinalize) instance_finalize = nullptr;
  decltype(&TRITONBACKEND_ModelInstanceExecute) instance_execute = nullptr;
  // Optional: a library without it gets the core's defaults.
  decltype(&TRITONBACKEND_GetBackendAttribute) backend_attribute = nullptr;
  void* library = nullptr;
  std::string failure;  // why a required entry point is missing
};

// The folder of the library that holds `symbol` (its real path), "" when
// unknown.
inline std::string FolderOf(const void* symbol) {
  Dl_info info{};
  char real[PATH_MAX];
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr ||
      realpath(info.dli_fname, real) == nullptr) {
    return "";
  }
  std::string path(real);
  return path.substr(0, path.rfind('/'));
}

template <typename Fn>
void Resolve(Entries* e, const char* name, Fn* entry, const std::string& what) {
  *entry = reinterpret_cast<Fn>(dlsym(e->library, name));
  if (*entry == nullptr && e->failure.empty()) {
    e->failure = what + " has no " + name;
  }
}

// The entry points of the library at `path` (`what` names it in failures),
// opened with `flags` besides RTLD_NOW | RTLD_LOCAL.
inline Entries Open(const std::string& path, const std::string& what, int flags) {
  Entries e;
  e.library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | flags);
  if (e.library == nullptr) {
    const char* why = dlerror();
    e.failure = what + " could not be loaded from " + path + ": " +
                (why != nullptr ? why : "unknown error");
    return e;
  }
  Resolve(&e, "TRITONBACKEND_Initialize", &e.initialize, what);
  Resolve(&e, "TRITONBACKEND_Finalize", &e.finalize, what);
  Resolve(&e, "TRITONBACKEND_ModelInitialize", &e.model_initialize, what);
  Resolve(&e, "TRITONBACKEND_ModelFinalize", &e.model_finalize, what);
  Resolve(&e, "TRITONBACKEND_ModelInstanceInitialize", &e.instance_initialize, what);
  Resolve(&e, "TRITONBACKEND_ModelInstanceFinalize", &e.instance_finalize, what);
  Resolve(&e, "TRITONBACKEND_ModelInstanceExecute", &e.instance_execute, what);
  e.backend_attribute = reinterpret_cast<decltype(&TRITONBACKEND_GetBackendAttribute)>(
      dlsym(e.library, "TRITONBACKEND_GetBackendAttribute"));
  return e;
}

// Calls `entry` of `entries`, or fails with why it is missing.
template <typename Fn, typename... Args>
TRITONSERVER_Error* Call(const Entries& entries, Fn Entries::* entry, Args... args) {
  Fn fn = entries.*entry;
  if (fn == nullptr) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, entries.failure.c_str());
  }
  return fn(args...);
}

}  // namespace tritonserver_forward
