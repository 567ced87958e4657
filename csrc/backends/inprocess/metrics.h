// Custom metric types for tritonserver._inprocess._backend (metrics.cc).
#pragma once

#include <pybind11/pybind11.h>
#include <tritonserver/backend.h>

namespace inprocess {

namespace tb = tritonserver::backend;
namespace py = pybind11;

// Adds MetricFamily and Metric to `module`.
void RegisterMetricTypes(py::module_& module);

}  // namespace inprocess
