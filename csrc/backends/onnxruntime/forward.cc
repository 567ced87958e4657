// onnxruntime: the backend that Triton model repositories name for ONNX
// models (platform "onnxruntime_onnx" or backend "onnxruntime"). Its models
// run on ONNX Runtime's Python API inside the interpreter that runs the
// server (tritonserver._onnx), through the inprocess backend's machinery:
// this library only forwards the seven entry points to
// libtriton_inprocess.so, found beside this library's own folder. The core
// gives each backend its own TRITONBACKEND_Backend, so the two backends keep
// separate states; the inprocess runtime sends a model whose configuration
// names this backend to tritonserver._onnx.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <string>

#include "triton/tritonbackend.h"

namespace {

// The inprocess library, loaded once (and kept: the core may call in until
// the process exits); nullptr with `error` set when it cannot be loaded.
void* Inprocess(std::string* error) {
  static std::string failure;
  static void* handle = [] {
    Dl_info info{};
    char real[PATH_MAX];
    if (dladdr(reinterpret_cast<void*>(&Inprocess), &info) == 0 || info.dli_fname == nullptr ||
        realpath(info.dli_fname, real) == nullptr) {
      failure = "the onnxruntime backend could not find its own library file";
      return static_cast<void*>(nullptr);
    }
    std::string path(real);
    path = path.substr(0, path.rfind('/'));  // .../backends/onnxruntime
    path = path.substr(0, path.rfind('/')) + "/inprocess/libtriton_inprocess.so";
    void* loaded = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (loaded == nullptr) {
      const char* why = dlerror();
      failure =
          "the onnxruntime backend runs on the inprocess backend, which could not be "
          "loaded from " +
          path + ": " + (why != nullptr ? why : "unknown error");
    }
    return loaded;
  }();
  if (handle == nullptr) *error = failure;
  return handle;
}

template <typename Fn, typename... Args>
TRITONSERVER_Error* Forward(const char* entry, Args... args) {
  std::string error;
  void* library = Inprocess(&error);
  void* symbol = library != nullptr ? dlsym(library, entry) : nullptr;
  if (symbol == nullptr) {
    if (error.empty()) error = std::string("the inprocess backend has no ") + entry;
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, error.c_str());
  }
  return reinterpret_cast<Fn>(symbol)(args...);
}

}  // namespace

extern "C" {

TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  return Forward<decltype(&TRITONBACKEND_Initialize)>("TRITONBACKEND_Initialize", backend);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend) {
  return Forward<decltype(&TRITONBACKEND_Finalize)>("TRITONBACKEND_Finalize", backend);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  return Forward<decltype(&TRITONBACKEND_ModelInitialize)>("TRITONBACKEND_ModelInitialize", model);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  return Forward<decltype(&TRITONBACKEND_ModelFinalize)>("TRITONBACKEND_ModelFinalize", model);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance* instance) {
  return Forward<decltype(&TRITONBACKEND_ModelInstanceInitialize)>(
      "TRITONBACKEND_ModelInstanceInitialize", instance);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance* instance) {
  return Forward<decltype(&TRITONBACKEND_ModelInstanceFinalize)>(
      "TRITONBACKEND_ModelInstanceFinalize", instance);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count) {
  return Forward<decltype(&TRITONBACKEND_ModelInstanceExecute)>(
      "TRITONBACKEND_ModelInstanceExecute", instance, requests, request_count);
}

}  // extern "C"
