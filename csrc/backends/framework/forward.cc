// The framework backends: onnxruntime (ONNX models, platform
// "onnxruntime_onnx"), pytorch (TorchScript, platform "pytorch_libtorch") and
// openvino (OpenVINO IR), the names Triton model repositories give them. Their
// models run on the framework's Python API inside the interpreter that runs
// the server (tritonserver._framework and one module per framework), through
// the inprocess backend's machinery: each of these libraries is this one file,
// built under the backend's name, and only forwards the seven entry points to
// libtriton_inprocess.so, found beside its own folder. The core gives each
// backend its own TRITONBACKEND_Backend, so they keep separate states; the
// inprocess runtime sends a model to the framework its configuration names.
//
// Built once more as the python backend's slot for Python models run
// in-process (libtriton_python_inprocess.so, which a backend folder holds as
// libtriton_python.so): that file may be a copy, and a copy of the inprocess
// library itself would be a second, separate library in the process.
// Through this one there is only ever one: its sibling inprocess/ folder
// links to the package's.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <string>

#include "triton/tritonbackend.h"
#include "tritonserver/backend/marker.h"

namespace {

// The inprocess library's entry points, resolved once (the library is kept
// loaded: the core may call in until the process exits). `failure` says why
// one is missing.
struct Entries {
  decltype(&TRITONBACKEND_Initialize) initialize = nullptr;
  decltype(&TRITONBACKEND_Finalize) finalize = nullptr;
  decltype(&TRITONBACKEND_ModelInitialize) model_initialize = nullptr;
  decltype(&TRITONBACKEND_ModelFinalize) model_finalize = nullptr;
  decltype(&TRITONBACKEND_ModelInstanceInitialize) instance_initialize = nullptr;
  decltype(&TRITONBACKEND_ModelInstanceFinalize) instance_finalize = nullptr;
  decltype(&TRITONBACKEND_ModelInstanceExecute) instance_execute = nullptr;
  std::string failure;
};

std::string InprocessPath() {
  Dl_info info{};
  char real[PATH_MAX];
  if (dladdr(reinterpret_cast<void*>(&InprocessPath), &info) == 0 || info.dli_fname == nullptr ||
      realpath(info.dli_fname, real) == nullptr) {
    return "";
  }
  std::string path(real);
  path = path.substr(0, path.rfind('/'));  // .../backends/<this backend>
  return path.substr(0, path.rfind('/')) + "/inprocess/libtriton_inprocess.so";
}

template <typename Fn>
void Resolve(void* library, const char* name, Fn* entry, std::string* failure) {
  *entry = reinterpret_cast<Fn>(dlsym(library, name));
  if (*entry == nullptr && failure->empty()) {
    *failure = std::string("the inprocess backend has no ") + name;
  }
}

const Entries& Inprocess() {
  static const Entries entries = [] {
    Entries e;
    const std::string path = InprocessPath();
    if (path.empty()) {
      e.failure =
          "the " TRITONSERVER_FRAMEWORK_BACKEND " backend could not find its own library file";
      return e;
    }
    void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (library == nullptr) {
      const char* why = dlerror();
      e.failure = "the " TRITONSERVER_FRAMEWORK_BACKEND
                  " backend runs on the inprocess backend, which could not be "
                  "loaded from " +
                  path + ": " + (why != nullptr ? why : "unknown error");
      return e;
    }
    Resolve(library, "TRITONBACKEND_Initialize", &e.initialize, &e.failure);
    Resolve(library, "TRITONBACKEND_Finalize", &e.finalize, &e.failure);
    Resolve(library, "TRITONBACKEND_ModelInitialize", &e.model_initialize, &e.failure);
    Resolve(library, "TRITONBACKEND_ModelFinalize", &e.model_finalize, &e.failure);
    Resolve(library, "TRITONBACKEND_ModelInstanceInitialize", &e.instance_initialize, &e.failure);
    Resolve(library, "TRITONBACKEND_ModelInstanceFinalize", &e.instance_finalize, &e.failure);
    Resolve(library, "TRITONBACKEND_ModelInstanceExecute", &e.instance_execute, &e.failure);
    return e;
  }();
  return entries;
}

template <typename Fn, typename... Args>
TRITONSERVER_Error* Forward(Fn Entries::* entry, Args... args) {
  const Entries& entries = Inprocess();
  Fn fn = entries.*entry;
  if (fn == nullptr) {
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, entries.failure.c_str());
  }
  return fn(args...);
}

}  // namespace

// Its models run on inprocess, an SDK backend: they take its worker count.
TRITONSERVER_BACKEND_SDK_MARKER();

extern "C" {

TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  return Forward(&Entries::initialize, backend);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend) {
  return Forward(&Entries::finalize, backend);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  return Forward(&Entries::model_initialize, model);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  return Forward(&Entries::model_finalize, model);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance* instance) {
  return Forward(&Entries::instance_initialize, instance);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance* instance) {
  return Forward(&Entries::instance_finalize, instance);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count) {
  return Forward(&Entries::instance_execute, instance, requests, request_count);
}

}  // extern "C"
