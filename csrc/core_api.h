// The table of Triton core functions, filled at run time from the core that
// the Python layer located. The extension never links to the core: it opens
// it with dlopen (RTLD_LOCAL) and looks every function up by name, so import
// works without a core, any SONAME works, and a function newer than the
// loaded core simply stays null.
#pragma once

#include <string>

#include "triton/tritonserver.h"

namespace tritonpy {

struct CoreApi {
#define X(name) decltype(&::name) name = nullptr;
#include "core_functions.def"
#undef X
};

// Opens the core at `path` and fills the table; throws Error on
// failure. Loading the same path again is a no-op; another path is refused.
void LoadCore(const std::string& path);
bool CoreLoaded();
std::string CorePath();

// The loaded table; throws UnavailableError when no core is loaded yet.
const CoreApi& Core();

// Names of declared functions the loaded core does not export.
std::string MissingFunctions();

[[noreturn]] void ThrowMissingFunction(const char* name);

// Forgets one function, as a core that predates it would lack it; for tests
// of the missing-function path. Returns false for an unknown name.
bool ForgetFunction(const std::string& name);

template <typename Fn>
inline Fn Need(Fn fn, const char* name) {
  if (fn == nullptr) ThrowMissingFunction(name);
  return fn;
}

}  // namespace tritonpy

// Calls a core function by name, raising UnsupportedError if this core lacks
// it: TRITON_FN(TRITONSERVER_ServerIsLive)(server, &live).
#define TRITON_FN(name) ::tritonpy::Need(::tritonpy::Core().name, #name)
