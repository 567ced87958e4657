#include "bindings/errors.h"

#include "core_api.h"

namespace py = pybind11;

namespace tritonpy {

ErrorPtr::~ErrorPtr() {
  if (err_ != nullptr && CoreLoaded()) Core().TRITONSERVER_ErrorDelete(err_);
}

void Check(TRITONSERVER_Error* err) {
  if (err == nullptr) return;
  ErrorPtr owned(err);
  const CoreApi& api = Core();
  const char* message = api.TRITONSERVER_ErrorMessage(err);
  throw Error(api.TRITONSERVER_ErrorCode(err), message ? message : "");
}

TRITONSERVER_Error* MakeError(TRITONSERVER_Error_Code code, const std::string& message) {
  return Core().TRITONSERVER_ErrorNew(code, message.c_str());
}

void RegisterErrors(py::module_&) { pyinterop::RegisterErrorTranslator(); }

}  // namespace tritonpy
