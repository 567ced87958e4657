#include "bindings/first_response.h"

#include <pybind11/stl.h>

#include <chrono>
#include <memory>

#include "bindings/errors.h"
#include "core_api.h"

namespace py = pybind11;

namespace tritonpy {
namespace {

constexpr char kFamily[] = "nv_inference_first_response_histogram_ms";
constexpr char kHelp[] = "Duration from request to first response in milliseconds";
const std::vector<double> kDefaultBuckets = {100, 500, 2000, 5000};

struct OwnedArgs {
  TRITONSERVER_MetricArgs* ptr = nullptr;
  ~OwnedArgs() {
    if (ptr != nullptr) ErrorPtr ignored(Core().TRITONSERVER_MetricArgsDelete(ptr));
  }
};

using OwnedParameter = std::unique_ptr<TRITONSERVER_Parameter, void (*)(TRITONSERVER_Parameter*)>;

}  // namespace

FirstResponseHistogram& FirstResponseHistogram::Get() {
  static auto* table = new FirstResponseHistogram();  // never destroyed (see the header)
  return *table;
}

uint64_t FirstResponseHistogram::SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void FirstResponseHistogram::SetBuckets(const std::string& model, std::vector<double> buckets) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto known = buckets_.find(model);
  const std::vector<double>& before = known == buckets_.end() ? kDefaultBuckets : known->second;
  const std::vector<double>& after = buckets.empty() ? kDefaultBuckets : buckets;
  if (before != after) RemoveLocked(model);
  if (buckets.empty()) {
    buckets_.erase(model);
  } else {
    buckets_[model] = std::move(buckets);
  }
}

void FirstResponseHistogram::Add(const std::string& model, int64_t version) {
  std::lock_guard<std::mutex> lock(mutex_);
  MetricLocked(model, version);
}

void FirstResponseHistogram::Remove(const std::string& model) {
  std::lock_guard<std::mutex> lock(mutex_);
  RemoveLocked(model);
}

void FirstResponseHistogram::RemoveLocked(const std::string& model) {
  for (auto it = metrics_.lower_bound({model, INT64_MIN});
       it != metrics_.end() && it->first.first == model;) {
    ErrorPtr ignored(Core().TRITONSERVER_MetricDelete(it->second));
    it = metrics_.erase(it);
  }
}

void FirstResponseHistogram::Observe(TRITONSERVER_InferenceResponse* response,
                                     uint64_t sent_ns) noexcept {
  // Whole milliseconds, as Triton's core divides them.
  const double ms = static_cast<double>((SteadyNs() - sent_ns) / 1000000);
  try {
    const CoreApi& api = Core();
    const char* name = nullptr;
    int64_t version = 0;
    ErrorPtr failed(api.TRITONSERVER_InferenceResponseModel(response, &name, &version));
    if (failed.get() != nullptr || name == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    TRITONSERVER_Metric* metric = MetricLocked(name, version);
    if (metric != nullptr) ErrorPtr ignored(api.TRITONSERVER_MetricObserve(metric, ms));
  } catch (...) {  // out of memory, or no core: this observation is lost
  }
}

TRITONSERVER_Metric* FirstResponseHistogram::MetricLocked(const std::string& model,
                                                          int64_t version) {
  auto found = metrics_.find({model, version});
  if (found != metrics_.end()) return found->second;
  const CoreApi& api = Core();
  if (api.TRITONSERVER_MetricNewWithArgs == nullptr) return nullptr;  // a core without them
  if (family_ == nullptr) {
    Check(api.TRITONSERVER_MetricFamilyNew(&family_, TRITONSERVER_METRIC_KIND_HISTOGRAM, kFamily,
                                           kHelp));
  }
  auto known = buckets_.find(model);
  const std::vector<double>& buckets = known == buckets_.end() ? kDefaultBuckets : known->second;
  OwnedArgs args;
  Check(api.TRITONSERVER_MetricArgsNew(&args.ptr));
  Check(api.TRITONSERVER_MetricArgsSetHistogram(args.ptr, buckets.data(), buckets.size()));
  const std::string version_text = std::to_string(version);
  OwnedParameter model_label(
      api.TRITONSERVER_ParameterNew("model", TRITONSERVER_PARAMETER_STRING, model.c_str()),
      api.TRITONSERVER_ParameterDelete);
  OwnedParameter version_label(
      api.TRITONSERVER_ParameterNew("version", TRITONSERVER_PARAMETER_STRING, version_text.c_str()),
      api.TRITONSERVER_ParameterDelete);
  if (model_label == nullptr || version_label == nullptr) return nullptr;
  const TRITONSERVER_Parameter* labels[] = {model_label.get(), version_label.get()};
  TRITONSERVER_Metric* metric = nullptr;
  Check(api.TRITONSERVER_MetricNewWithArgs(&metric, family_, labels, 2, args.ptr));
  metrics_[{model, version}] = metric;
  return metric;
}

void RegisterFirstResponse(py::module_& m) {
  auto& table = FirstResponseHistogram::Get();
  m.def(
      "first_response_buckets",
      [&table](const std::string& model, std::vector<double> buckets) {
        table.SetBuckets(model, std::move(buckets));
      },
      py::arg("model"), py::arg("buckets"),
      "The buckets of the model's nv_inference_first_response_histogram_ms from now on "
      "([]: Triton's default); its histograms made with other buckets are deleted.");
  m.def(
      "first_response_add",
      [&table](const std::string& model, int64_t version) { table.Add(model, version); },
      py::arg("model"), py::arg("version"),
      "Makes the model version's (zero) first-response histogram now.");
  m.def(
      "first_response_remove", [&table](const std::string& model) { table.Remove(model); },
      py::arg("model"), "Deletes every first-response histogram of the model.");
}

}  // namespace tritonpy
