// The python backend's stub library (Triton's libtriton_python.so of the
// installed core) behind the input checks a 2026 python backend makes.
//
// The 2.51 python backend starts each stub process through `bash -c` with
// the model's (auto-complete) or the instance's name on the command line, so
// a model named `a;b` runs `b` as a shell command in the server's account.
// The python backend of 2025 onwards refuses such names before any process
// starts ("Invalid stub name: contains invalid characters", INVALID_ARG);
// this library makes the same refusal, then hands every call to the real
// library, found as stub/libtriton_python.so beside this file (its folder
// is the backend's location, where the python backend looks for its stub
// executable and triton_python_backend_utils.py).
#include <string>

#include "../framework/library.h"

namespace {

namespace fw = tritonserver_forward;

// The characters a 2026 python backend refuses in a stub's name (its
// INVALID_CHARS).
constexpr const char* kInvalidChars = ";|&$`<>()[]{}\\\"'*?~#!";

bool ValidName(const char* name) {
  if (name == nullptr) {
    return false;
  }
  const std::string s(name);
  return !s.empty() && s.find_first_of(kInvalidChars) == std::string::npos;
}

TRITONSERVER_Error* InvalidStubName() {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG,
                               "Invalid stub name: contains invalid characters");
}

// Loaded the first time the core calls in; closed when the core unloads
// this library (the static's destructor runs then), as the core would close
// the real one.
struct Real {
  fw::Entries entries;
  Real() {
    const std::string folder = fw::FolderOf(reinterpret_cast<const void*>(&ValidName));
    if (folder.empty()) {
      entries.failure = "the python backend's stub guard could not find its own library file";
      return;
    }
    entries = fw::Open(folder + "/stub/libtriton_python.so", "the python backend", 0);
  }
  ~Real() {
    if (entries.library != nullptr) {
      dlclose(entries.library);
    }
  }
};

const fw::Entries& Backend() {
  static const Real real;
  return real.entries;
}

}  // namespace

extern "C" {

TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  return fw::Call(Backend(), &fw::Entries::initialize, backend);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend) {
  return fw::Call(Backend(), &fw::Entries::finalize, backend);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_GetBackendAttribute(
    TRITONBACKEND_Backend* backend, TRITONBACKEND_BackendAttribute* attributes) {
  const fw::Entries& entries = Backend();
  if (entries.backend_attribute == nullptr) {
    return nullptr;  // the core's defaults
  }
  return entries.backend_attribute(backend, attributes);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  // The auto-complete stub is named after the model.
  bool auto_complete = false;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelAutoCompleteConfig(model, &auto_complete);
  if (err != nullptr) {
    return err;
  }
  if (auto_complete) {
    const char* name = nullptr;
    if ((err = TRITONBACKEND_ModelName(model, &name)) != nullptr) {
      return err;
    }
    if (!ValidName(name)) {
      return InvalidStubName();
    }
  }
  return fw::Call(Backend(), &fw::Entries::model_initialize, model);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  // Not for a model refused above: the python backend never made its state.
  void* state = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelState(model, &state);
  if (err != nullptr || state == nullptr) {
    return err;
  }
  return fw::Call(Backend(), &fw::Entries::model_finalize, model);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(
    TRITONBACKEND_ModelInstance* instance) {
  // Each instance's stub is named after the instance.
  const char* name = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceName(instance, &name);
  if (err != nullptr) {
    return err;
  }
  if (!ValidName(name)) {
    return InvalidStubName();
  }
  return fw::Call(Backend(), &fw::Entries::instance_initialize, instance);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(
    TRITONBACKEND_ModelInstance* instance) {
  void* state = nullptr;
  TRITONSERVER_Error* err = TRITONBACKEND_ModelInstanceState(instance, &state);
  if (err != nullptr || state == nullptr) {
    return err;
  }
  return fw::Call(Backend(), &fw::Entries::instance_finalize, instance);
}
TRITONBACKEND_ISPEC TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(
    TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Request** requests,
    const uint32_t request_count) {
  return fw::Call(Backend(), &fw::Entries::instance_execute, instance, requests, request_count);
}

}  // extern "C"
