// Loading the core and asking it about itself.
#include <pybind11/pybind11.h>

#include "bindings/errors.h"
#include "core_api.h"

namespace py = pybind11;

namespace tritonpy {

void RegisterCore(py::module_& m) {
  m.def("load_core", &LoadCore, py::arg("path"),
        "Open the Triton core library at `path` (RTLD_LOCAL) and bind to it.");
  m.def("core_loaded", &CoreLoaded);
  m.def("core_path", &CorePath);
  m.def("missing_core_functions", &MissingFunctions,
        "Comma-separated names of declared functions the loaded core lacks.");
  m.def("api_version", [] {
    uint32_t major = 0, minor = 0;
    Check(TRITON_FN(TRITONSERVER_ApiVersion)(&major, &minor));
    return py::make_tuple(major, minor);
  });
  m.def("forget_core_function", &ForgetFunction, py::arg("name"),
        "Testing aid: behave as if the loaded core lacked this function.");
}

}  // namespace tritonpy
