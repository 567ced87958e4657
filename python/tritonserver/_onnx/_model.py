"""OnnxRuntimeModel: one load of an ONNX model. One ONNX Runtime session per
instance (instance_group count N gives N sessions, running in parallel:
ONNX Runtime releases the GIL while it runs); a batch the dynamic batcher
formed runs as one ``run`` along the first dimension, computing only the
outputs its requests asked for."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from tritonserver._errors import InvalidArgumentError
from tritonserver._inprocess._model import ModelInstance, PythonModel
from tritonserver._onnx import _config, _session


class OnnxRuntimeModel(PythonModel):
    def initialize(self) -> None:
        """Everything that can refuse the model is checked here, once per
        load, before any instance exists (a load that fails in an instance
        leaves the core 2.51 more work to undo)."""
        self._ort = _session.onnxruntime()
        self._path = _session.model_path(self.name, self.version, self.repository_path,
                                          self.config)
        self._options = _session.session_options(self._ort, self.config, self.parameters)
        self._batching = int(self.config.get("max_batch_size", 0)) > 0
        self._strings = {e["name"] for e in self.config.get("input", [])
                         if e.get("data_type") == "TYPE_STRING"}
        kinds = {g.get("kind", "KIND_CPU") for g in self.config.get("instance_group", [])}
        self._providers = {kind: _session.providers(self._ort, self.name, self.config, kind)
                           for kind in kinds | {"KIND_CPU"}}
        first = sorted(kinds)[0] if kinds else "KIND_CPU"
        session = _session.open_session(self._ort, self.name, self._path, self._options,
                                        self._providers[first])
        _config.check(self.name, self.config, *_config.model_tensors(self.name, session))
        self._spare: Optional[tuple[str, Any]] = (first, session)  # for the first instance

    def initialize_instance(self, instance: ModelInstance) -> None:
        kind = instance.kind if instance.kind.startswith("KIND_") else f"KIND_{instance.kind}"
        spare, self._spare = self._spare, None
        if spare is not None and spare[0] == kind and instance.device_id == 0:
            session = spare[1]
        else:
            chosen = self._providers.get(kind) or self._providers["KIND_CPU"]
            session = _session.open_session(self._ort, self.name, self._path, self._options,
                                            chosen, instance.device_id)
        instance.session = session  # type: ignore[attr-defined]
        instance.run_options = _session.run_options(  # type: ignore[attr-defined]
            self._ort, self.parameters)

    def finalize(self) -> None:
        self._spare = None  # an instance that was never made leaves its session here

    def finalize_instance(self, instance: ModelInstance) -> None:
        instance.__dict__.pop("session", None)  # frees the session and its memory

    def execute(self, requests: list[Any]) -> list[Any]:
        instance = requests[0].instance
        if self._batching and len(requests) > 1:
            stacked = self._stack(requests)
            if stacked is not None:
                return self._run_batch(instance, requests, *stacked)
        return [self._run_one(instance, r) for r in requests]

    def _feed(self, request: Any) -> dict[str, Any]:
        feed = request.inputs
        if self._strings:
            feed = dict(feed)
            for name in self._strings.intersection(feed):
                feed[name] = _as_str(name, feed[name])
        return feed  # type: ignore[no-any-return]

    def _stack(self, requests: list[Any]) -> Optional[tuple[dict[str, Any], list[int]]]:
        """One feed for the whole batch and each request's size; None when a
        request's input is bad or the shapes differ (then each runs alone)."""
        try:
            feeds = [self._feed(r) for r in requests]
            feed = {name: np.concatenate([f[name] for f in feeds]) for name in feeds[0]}
        except (InvalidArgumentError, ValueError, KeyError):
            return None
        return feed, [len(next(iter(f.values()))) if f else 0 for f in feeds]

    def _run(self, instance: Any, names: list[str], feed: dict[str, Any]) -> list[Any]:
        return instance.session.run(names, feed, instance.run_options)  # type: ignore[no-any-return]

    def _run_one(self, instance: Any, request: Any) -> Any:
        try:
            feed = self._feed(request)
        except InvalidArgumentError as e:
            return e  # this request fails alone
        names = list(request.requested_outputs)
        return dict(zip(names, self._run(instance, names, feed)))

    def _run_batch(self, instance: Any, requests: list[Any], feed: dict[str, Any],
                   sizes: list[int]) -> list[Any]:
        names = sorted({n for r in requests for n in r.requested_outputs})
        results = self._run(instance, names, feed)
        cuts = np.cumsum(sizes)[:-1]
        parts = [np.split(result, cuts) for result in results]
        return [{n: parts[i][k] for i, n in enumerate(names) if n in r.requested_outputs}
                for k, r in enumerate(requests)]


def _as_str(name: str, array: Any) -> Any:
    """BYTES arrive as bytes objects; ONNX string tensors take str (UTF-8)."""
    try:
        return np.vectorize(lambda b: b.decode("utf-8") if isinstance(b, bytes) else str(b),
                            otypes=[object])(array)
    except UnicodeDecodeError as e:
        raise InvalidArgumentError(
            f"input '{name}': ONNX string tensors hold UTF-8 text; an element is not "
            f"({e.reason} at byte {e.start})") from None

