// tritonserver._c.triton_bindings: registers each C object family; nothing
// else lives here.
#include <pybind11/pybind11.h>

#include "bindings/errors.h"
#include "core_api.h"

namespace py = pybind11;

namespace tritonpy {
void RegisterCore(py::module_& m);
void RegisterCrashReport(py::module_& m);
void RegisterDlpack(py::module_& m);
void RegisterEnums(py::module_& m);
void RegisterFirstResponse(py::module_& m);
void RegisterLoopNotifier(py::module_& m);
void RegisterRequest(py::module_& m);
void RegisterResponseObjects(py::module_& m);
void RegisterResponseRecord(py::module_& m);
void RegisterResponseStream(py::module_& m);
void RegisterServer(py::module_& m);
void RegisterServerOptions(py::module_& m);
void RegisterTrace(py::module_& m);
}  // namespace tritonpy

PYBIND11_MODULE(triton_bindings, m) {
  m.doc() = "Thin binding over the Triton Inference Server C API.";
  tritonpy::RegisterErrors(m);
  tritonpy::RegisterEnums(m);
  tritonpy::RegisterCore(m);
  tritonpy::RegisterCrashReport(m);
  tritonpy::RegisterServerOptions(m);
  tritonpy::RegisterServer(m);
  tritonpy::RegisterFirstResponse(m);
  tritonpy::RegisterLoopNotifier(m);
  tritonpy::RegisterResponseRecord(m);
  tritonpy::RegisterResponseObjects(m);
  tritonpy::RegisterTrace(m);
  tritonpy::RegisterRequest(m);
  tritonpy::RegisterResponseStream(m);
  tritonpy::RegisterDlpack(m);
}
