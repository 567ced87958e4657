// Custom metrics for Python models (pb_utils.MetricFamily / Metric), on the
// core's custom-metrics C API: they appear on the server's /metrics beside
// Triton's own. A metric keeps its family alive (the core refuses to delete a
// family that still has metrics), and each is deleted when Python lets go of
// it. None of these calls runs a callback: they keep the GIL.
#include "metrics.h"

#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace inprocess {
namespace {

class Family {
 public:
  Family(int kind, const std::string& name, const std::string& description) : kind_(kind) {
    if (kind < TRITONSERVER_METRIC_KIND_COUNTER || kind > TRITONSERVER_METRIC_KIND_HISTOGRAM) {
      throw tb::Error::InvalidArgument("metric kind must be COUNTER, GAUGE or HISTOGRAM");
    }
    tb::Check(TRITONSERVER_MetricFamilyNew(&handle_, static_cast<TRITONSERVER_MetricKind>(kind),
                                           name.c_str(), description.c_str()));
  }
  ~Family() {
    if (handle_ != nullptr) TRITONSERVER_ErrorDelete(TRITONSERVER_MetricFamilyDelete(handle_));
  }
  Family(const Family&) = delete;
  Family& operator=(const Family&) = delete;

  TRITONSERVER_MetricFamily* handle() const { return handle_; }
  int kind() const { return kind_; }

 private:
  TRITONSERVER_MetricFamily* handle_ = nullptr;
  int kind_;
};

// Deletes what a unique_ptr holds with the core's function.
template <typename T, TRITONSERVER_Error* (*Delete)(T*)>
struct CoreDelete {
  void operator()(T* p) const noexcept { TRITONSERVER_ErrorDelete(Delete(p)); }
};

class Metric {
 public:
  Metric(std::shared_ptr<Family> family, const std::map<std::string, std::string>& labels,
         const std::optional<std::vector<double>>& buckets)
      : family_(std::move(family)) {
    const bool histogram = family_->kind() == TRITONSERVER_METRIC_KIND_HISTOGRAM;
    if (histogram && !buckets) {
      throw tb::Error::InvalidArgument("Missing required buckets for histogram metrics");
    }
    if (!histogram && buckets) {
      throw tb::Error::InvalidArgument("buckets are only for HISTOGRAM metric families");
    }
    std::vector<std::unique_ptr<TRITONSERVER_Parameter, void (*)(TRITONSERVER_Parameter*)>> owned;
    std::vector<const TRITONSERVER_Parameter*> params;
    for (const auto& [key, value] : labels) {
      TRITONSERVER_Parameter* p =
          TRITONSERVER_ParameterNew(key.c_str(), TRITONSERVER_PARAMETER_STRING, value.c_str());
      if (p == nullptr) throw tb::Error::Internal("could not make the label '" + key + "'");
      owned.emplace_back(p, &TRITONSERVER_ParameterDelete);
      params.push_back(p);
    }
    std::unique_ptr<TRITONSERVER_MetricArgs,
                    CoreDelete<TRITONSERVER_MetricArgs, TRITONSERVER_MetricArgsDelete>>
        args;
    if (buckets) {
      TRITONSERVER_MetricArgs* made = nullptr;
      tb::Check(TRITONSERVER_MetricArgsNew(&made));
      args.reset(made);
      tb::Check(TRITONSERVER_MetricArgsSetHistogram(made, buckets->data(), buckets->size()));
    }
    tb::Check(TRITONSERVER_MetricNewWithArgs(&handle_, family_->handle(), params.data(),
                                             params.size(), args.get()));
  }
  ~Metric() {
    if (handle_ != nullptr) TRITONSERVER_ErrorDelete(TRITONSERVER_MetricDelete(handle_));
  }
  Metric(const Metric&) = delete;
  Metric& operator=(const Metric&) = delete;

  void Increment(double value) { tb::Check(TRITONSERVER_MetricIncrement(handle_, value)); }
  void Set(double value) { tb::Check(TRITONSERVER_MetricSet(handle_, value)); }
  void Observe(double value) { tb::Check(TRITONSERVER_MetricObserve(handle_, value)); }
  double Value() {
    double value = 0;
    tb::Check(TRITONSERVER_MetricValue(handle_, &value));
    return value;
  }

 private:
  std::shared_ptr<Family> family_;
  TRITONSERVER_Metric* handle_ = nullptr;
};

}  // namespace

void RegisterMetricTypes(py::module_& module) {
  py::class_<Family, std::shared_ptr<Family>>(module, "MetricFamily", py::module_local(),
                                              "A family of custom metrics (the core's).")
      .def(py::init<int, const std::string&, const std::string&>(), py::arg("kind"),
           py::arg("name"), py::arg("description"))
      .def_property_readonly("kind", &Family::kind);
  py::class_<Metric>(module, "Metric", py::module_local(), "One metric of a family.")
      .def(py::init<std::shared_ptr<Family>, const std::map<std::string, std::string>&,
                    const std::optional<std::vector<double>>&>(),
           py::arg("family"), py::arg("labels"), py::arg("buckets") = py::none())
      .def("increment", &Metric::Increment, py::arg("value"))
      .def("set", &Metric::Set, py::arg("value"))
      .def("observe", &Metric::Observe, py::arg("value"))
      .def("value", &Metric::Value);
}

}  // namespace inprocess
