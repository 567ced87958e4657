"""qa/L0_metrics' histogram tests, as its test.sh runs them: the four servers
whose steps are about nv_inference_first_response_histogram_ms.

- ``metric types default``: ``unit_test_models`` (identity_cache_off loaded,
  EXPLICIT mode), no metrics flag: test.sh's five ``metrics_config_test.py``
  checks of the default metric types (histograms missing among them);
- ``metric types histograms``: the same with ``--metrics-config
  histogram_latencies=true`` (histograms exist);
- ``histogram ensemble_decoupled``: the ``ensemble_decoupled`` folder as
  test.sh builds it (async_execute made from async_execute_decouple, its
  decoupled policy removed; the ensemble's version folder), histograms on:
  ``histogram_metrics_test.py TestHistogramMetrics.test_ensemble_decoupled``;
- ``histogram buckets override``: python_models' async_execute_decouple with
  the ``model_metrics`` block test.sh appends (buckets -1, 0.0, 1, 2.5),
  ``OVERRIDE_BUCKETS=-1,0,1,2.5,+Inf``: ``test_buckets_override``.

The other L0_metrics steps (GPU, pinned memory, CPU metrics, queue size,
namespacing, metrics intervals) are not histogram tests and are not run.
"""

from __future__ import annotations

import os
import shutil
from typing import Dict, List, Tuple

PATHS = ("qa/L0_metrics", "qa/python_models/async_execute_decouple")
SUITE = "L0_metrics_histogram"

_EXPLICIT = ["--model-control-mode=explicit", "--load-model=identity_cache_off"]
_ON = ["--metrics-config", "histogram_latencies=true"]
_TYPE_TESTS = ("test_inf_counters_exist", "test_inf_summaries_missing",
               "test_cache_counters_missing", "test_cache_summaries_missing")
MODEL_METRICS = """model_metrics {
  metric_control: [
    {
      metric_identifier: {
        family: "nv_inference_first_response_histogram_ms"
      }
      histogram_options: {
        buckets: [ -1, 0.0, 1, 2.5 ]
      }
    }
  ]
}
"""

# (group, repository key, server flags, [(script, test, environment)]).
GROUPS: List[Tuple[str, str, List[str], List[Tuple[str, str, Dict[str, str]]]]] = [
    ("metric-types-default", "metrics-types", _EXPLICIT,
     [("metrics_config_test.py", f"MetricsConfigTest.{t}", {})
      for t in ("test_inf_histograms_missing",) + _TYPE_TESTS]),
    ("metric-types-histograms", "metrics-types", _EXPLICIT + _ON,
     [("metrics_config_test.py", f"MetricsConfigTest.{t}", {})
      for t in ("test_inf_histograms_exist",) + _TYPE_TESTS]),
    ("histogram-ensemble", "metrics-ensemble", _ON + ["--log-verbose=1"],
     [("histogram_metrics_test.py", "TestHistogramMetrics.test_ensemble_decoupled", {})]),
    ("histogram-buckets", "metrics-buckets",
     ["--model-control-mode=explicit", "--load-model=async_execute_decouple", *_ON,
      "--log-verbose=1"],
     [("histogram_metrics_test.py", "TestHistogramMetrics.test_buckets_override",
       {"OVERRIDE_BUCKETS": "-1,0,1,2.5,+Inf"})]),
]

NOT_RUN = [
    "L0_metrics' other steps (GPU and pinned-memory metrics, CPU metrics, metrics intervals, "
    "queue size, model namespacing): not histogram tests",
]


def build_repositories(qa: str, work: str) -> Dict[str, str]:
    """The three folders test.sh serves for these steps (its mkdir, rm, cp,
    sed and cat lines)."""
    metrics = os.path.join(qa, "L0_metrics")
    repos = {key: os.path.join(work, f"repo-{key}")
             for key in ("metrics-types", "metrics-ensemble", "metrics-buckets")}
    for folder in repos.values():
        shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(os.path.join(metrics, "unit_test_models"), repos["metrics-types"])
    for name in ("identity_cache_on", "identity_cache_off"):
        os.makedirs(os.path.join(repos["metrics-types"], name, "1"), exist_ok=True)

    ensemble = repos["metrics-ensemble"]
    shutil.copytree(os.path.join(metrics, "ensemble_decoupled"), ensemble)
    os.makedirs(os.path.join(ensemble, "ensemble", "1"), exist_ok=True)
    shutil.rmtree(os.path.join(ensemble, "async_execute"), ignore_errors=True)
    shutil.copytree(os.path.join(ensemble, "async_execute_decouple"),
                    os.path.join(ensemble, "async_execute"))
    config = os.path.join(ensemble, "async_execute", "config.pbtxt")
    with open(config) as f:
        text = f.read()
    with open(config, "w") as f:
        f.write(text.replace("model_transaction_policy { decoupled: True }", ""))

    source = os.path.join(qa, "python_models", "async_execute_decouple")
    model = os.path.join(repos["metrics-buckets"], "async_execute_decouple")
    os.makedirs(os.path.join(model, "1"))
    shutil.copyfile(os.path.join(source, "model.py"), os.path.join(model, "1", "model.py"))
    with open(os.path.join(source, "config.pbtxt")) as f:
        text = f.read()
    with open(os.path.join(model, "config.pbtxt"), "w") as f:
        f.write(text + MODEL_METRICS)
    return repos
