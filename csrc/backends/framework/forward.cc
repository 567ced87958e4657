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
#include <string>

#include "library.h"
#include "tritonserver/backend/marker.h"

namespace {

namespace fw = tritonserver_forward;

// The inprocess library's entry points, resolved once (the library is kept
// loaded: the core may call in until the process exits).
const fw::Entries& Inprocess() {
  static const fw::Entries entries = [] {
    std::string folder = fw::FolderOf(reinterpret_cast<const void*>(&Inprocess));
    if (folder.empty()) {
      fw::Entries e;
      e.failure =
          "the " TRITONSERVER_FRAMEWORK_BACKEND " backend could not find its own library file";
      return e;
    }
    folder = folder.substr(0, folder.rfind('/'));  // .../backends/<this backend> -> .../backends
    return fw::Open(folder + "/inprocess/libtriton_inprocess.so",
                    "the " TRITONSERVER_FRAMEWORK_BACKEND
                    " backend runs on the inprocess backend, which",
                    RTLD_NODELETE);
  }();
  return entries;
}

template <typename Fn, typename... Args>
TRITONSERVER_Error* Forward(Fn fw::Entries::* entry, Args... args) {
  return fw::Call(Inprocess(), entry, args...);
}

}  // namespace

// Its models run on inprocess, an SDK backend: they take its worker count.
TRITONSERVER_BACKEND_SDK_MARKER();

extern "C" {

TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  return Forward(&fw::Entries::initialize, backend);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend) {
  return Forward(&fw::Entries::finalize, backend);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  return Forward(&fw::Entries::model_initialize, model);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  return Forward(&fw::Entries::model_finalize, model);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance* instance) {
  return Forward(&fw::Entries::instance_initialize, instance);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance* instance) {
  return Forward(&fw::Entries::instance_finalize, instance);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count) {
  return Forward(&fw::Entries::instance_execute, instance, requests, request_count);
}

}  // extern "C"
