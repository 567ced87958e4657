// Triton's time-to-first-response histogram, nv_inference_first_response_histogram_ms
// (Triton 2.52+, --metrics-config histogram_latencies=true), which core 2.51
// lacks: the binding times each request it sends from the send to its first
// response and observes the whole milliseconds, as Triton's core does, on a
// histogram of the core's custom-metrics C API, so it appears on the server's
// /metrics beside Triton's own. One table for the process, as the core's
// metrics registry is one: a model's metric is labelled with its name and
// version only, and two servers serving the same model share it.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "triton/tritonserver.h"

namespace tritonpy {

class FirstResponseHistogram {
 public:
  // The process's table (never destroyed: core threads may observe at exit).
  static FirstResponseHistogram& Get();

  // The buckets of `model`'s histograms from now on (empty: Triton's
  // default, 100, 500, 2000 and 5000 ms). Metrics of `model` made with
  // other buckets are deleted (a reload with new buckets starts again).
  void SetBuckets(const std::string& model, std::vector<double> buckets);
  // Makes the (zero) histogram of `model` `version` now, as Triton shows a
  // loaded model's before any request.
  void Add(const std::string& model, int64_t version);
  // Deletes every histogram of `model` (unloaded).
  void Remove(const std::string& model);
  // The first response of a request sent at `sent_ns` (SteadyNs()).
  void Observe(TRITONSERVER_InferenceResponse* response, uint64_t sent_ns) noexcept;

  static uint64_t SteadyNs();

 private:
  FirstResponseHistogram() = default;
  TRITONSERVER_Metric* MetricLocked(const std::string& model, int64_t version);
  void RemoveLocked(const std::string& model);

  std::mutex mutex_;
  TRITONSERVER_MetricFamily* family_ = nullptr;
  std::map<std::pair<std::string, int64_t>, TRITONSERVER_Metric*> metrics_;
  std::map<std::string, std::vector<double>> buckets_;
};

void RegisterFirstResponse(pybind11::module_& m);

}  // namespace tritonpy
