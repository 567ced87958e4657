"""Triton's time-to-first-response histogram on a core that lacks it.

Triton 2.52 added ``nv_inference_first_response_histogram_ms`` (with
``--metrics-config histogram_latencies=true``) and the model configuration's
``model_metrics``, which sets a model's buckets. Core 2.51 has neither: it
refuses a config.pbtxt that carries ``model_metrics`` (a field it does not
know), and it has no such histogram. The binding times each request it sends
to its first response and observes it on a histogram of the core's
custom-metrics API (csrc/bindings/first_response.h); this module decides when:
whether the server asked for it, each model's buckets, the histograms made
when a model loads (Triton shows a loaded model's, at zero, before any
request) and deleted when it unloads, and the configuration handed to the
core without ``model_metrics`` (checked here as Triton checks it).

For: core 2.51 (the core's metric_model_reporter.cc, model_config_utils.cc
and infer_response.cc read at their main, where the histogram is the core's).
"""

from __future__ import annotations

import json
from typing import Any, Optional

from tritonserver._c import triton_bindings as _bindings
from tritonserver._control.model_folder import ModelFiles
from tritonserver._errors import InvalidArgumentError, TritonError
from tritonserver._options import Options

FAMILY = "nv_inference_first_response_histogram_ms"
FIELD = "model_metrics"


def enabled(options: Options) -> bool:
    """Whether `options` ask for latency histograms (the core's global
    metrics group, as ``--metrics-config histogram_latencies=true`` sets it)."""
    settings = (options.metrics_configuration or {}).get("", {})
    return bool(options.metrics) and settings.get("histogram_latencies") == "true"


def check(config: dict[str, Any]) -> None:
    """InvalidArgumentError, with Triton's text, for a ``model_metrics``
    that Triton refuses."""
    for control in (config.get(FIELD) or {}).get("metric_control") or []:
        if "metric_identifier" not in control:
            raise InvalidArgumentError("metric control must specify 'metric_identifier'")
        if not (control["metric_identifier"] or {}).get("family"):
            raise InvalidArgumentError("metric identifier must specify non-empty 'family'")
        if "histogram_options" not in control:
            raise InvalidArgumentError("metric control must specify 'histogram_options'")
        if not (control["histogram_options"] or {}).get("buckets"):
            raise InvalidArgumentError("histogram options must specify non-empty 'buckets'")


def buckets(config: dict[str, Any]) -> list[float]:
    """The model's buckets for the first-response histogram ([]: Triton's
    default). The last ``metric_control`` naming the family wins, as in Triton."""
    chosen: list[float] = []
    for control in (config.get(FIELD) or {}).get("metric_control") or []:
        if control["metric_identifier"]["family"] == FAMILY:
            chosen = [float(b) for b in control["histogram_options"]["buckets"]]
    return chosen


class FirstResponse:
    """The first-response histograms of one server's models."""

    def __init__(self, options: Options) -> None:
        self.on = enabled(options)
        self._models: set[str] = set()  # those with histograms made

    def started(self, server: _bindings.Server) -> None:
        if self.on:
            server.time_first_response(True)

    def load_parameters(self, model: ModelFiles,
                        parameters: Optional[dict[str, Any]]) -> Optional[dict[str, Any]]:
        """The load's parameters, its configuration without ``model_metrics``
        (checked first), and the model's buckets set; `parameters` as they
        are for a model without the field."""
        config = model.config
        if not config or FIELD not in config:
            if self.on:
                _bindings.first_response_buckets(model.name, [])
            return parameters
        check(config)
        if self.on:
            _bindings.first_response_buckets(model.name, buckets(config))
        parameters = dict(model.parameters if parameters is None else parameters)
        given = json.loads(parameters["config"]) if "config" in parameters else dict(config)
        given.pop(FIELD, None)
        given.setdefault("name", model.name)
        parameters["config"] = json.dumps(given)
        return parameters

    def loaded(self, server: _bindings.Server, name: str) -> None:
        """Makes the (zero) histogram of each ready version of `name`."""
        if not self.on:
            return
        for entry in json.loads(server.model_index(1)):  # ready models only
            if entry.get("name") == name and entry.get("version"):
                self._models.add(name)
                try:
                    _bindings.first_response_add(name, int(entry["version"]))
                except TritonError:
                    # The family's name taken by a metric family of another
                    # kind (a model's own): the load stands, without it.
                    return

    def unloaded(self, name: str) -> None:
        if self.on:
            _bindings.first_response_remove(name)
            self._models.discard(name)

    def stopped(self) -> None:
        """The server stopped: its models' histograms go with them."""
        for name in list(self._models):
            self.unloaded(name)
