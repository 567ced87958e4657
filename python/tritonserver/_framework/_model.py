"""FrameworkModel: one load of a framework model (ONNX, TorchScript,
OpenVINO). A framework module subclasses it with three methods: `load`
(open and check the model, once per load), `open_instance` (what one
instance runs on) and `run` (named outputs of one feed). Batches, batch
inputs, ragged inputs, requested outputs and sequence states are handled
here, the same for every framework."""

from __future__ import annotations

from typing import Any, ClassVar, Optional

from tritonserver._errors import InvalidArgumentError, TritonError
from tritonserver._framework._batch import Batcher
from tritonserver._inprocess._model import ModelInstance, PythonModel


class FrameworkModel(PythonModel):
    """A framework's model. Instances run in parallel when the framework
    releases the GIL while it computes (ONNX Runtime, libtorch, OpenVINO do)."""

    def initialize(self) -> None:
        self._batcher = Batcher(self.config)
        self.load()

    # ---- What a framework defines -----------------------------------------

    # "MAJOR.MINOR" of the backend API (tritonserver.backend_api) the class is
    # written for; checked when the class is loaded.
    api_version: ClassVar[str]
    # Modules the backend imports to run (python -m tritonserver backends
    # says whether each imports).
    requires: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def complete(cls, name: str, version: int, config: dict[str, Any], repository_path: str,
                 settings: dict[str, str]) -> Optional[dict[str, Any]]:
        """The configuration completed from the model, or None to keep it;
        called before the load, only when the server allows completion
        (strict_model_config=False). `settings`: the backend's command-line
        settings (Options.backend_configuration)."""
        return None

    def load(self) -> None:
        """Open the model and check the configuration against it; raise to
        refuse the load. Called once per load, before any instance."""
        raise NotImplementedError

    def open_instance(self, instance: ModelInstance) -> Any:
        """What `run` gets for this instance (a session, a module...)."""
        raise NotImplementedError

    def run(self, runner: Any, names: list[str], feed: dict[str, Any]) -> list[Any]:
        """The outputs `names` (in that order) of one feed."""
        raise NotImplementedError

    def close_instance(self, runner: Any) -> None:
        """Frees what open_instance made (dropping it is the default)."""

    # Applied to each input before it is fed (None: inputs as they come).
    prepare: Optional[Any] = None

    # ---- The machinery ----------------------------------------------------

    def initialize_instance(self, instance: ModelInstance) -> None:
        instance.runner = self.open_instance(instance)  # type: ignore[attr-defined]

    def finalize_instance(self, instance: ModelInstance) -> None:
        runner = instance.__dict__.pop("runner", None)
        if runner is not None:
            self.close_instance(runner)

    def execute(self, requests: list[Any]) -> list[Any]:
        runner = requests[0].instance.runner
        batcher = self._batcher
        if batcher.batching and len(requests) > 1:
            try:
                feed = batcher.feed(requests, self.prepare)
            except (InvalidArgumentError, ValueError, KeyError):
                pass  # a bad request, or shapes that do not stack: each runs alone
            else:
                return self._answer(runner, requests, feed)
        answers = []
        for request in requests:
            try:
                feed = batcher.feed([request], self.prepare)
            except InvalidArgumentError as e:
                answers.append(e)  # this request fails alone
                continue
            answers.extend(self._answer(runner, [request], feed))
        return answers

    def _answer(self, runner: Any, requests: list[Any], feed: dict[str, Any]) -> list[Any]:
        batcher = self._batcher
        if len(requests) == 1:
            wanted = list(requests[0].requested_outputs)
        else:
            wanted = sorted({n for r in requests for n in r.requested_outputs})
        names = wanted + [n for n in batcher.state_outputs if n not in wanted]
        parts = batcher.split(requests, names, self.run(runner, names, feed))
        failed: dict[int, Exception] = {}
        if batcher.states:
            for k, (request, part) in enumerate(zip(requests, parts)):
                try:
                    batcher.update_states(request, part)
                except TritonError as e:  # this request's sequence alone
                    failed[k] = e
        if len(requests) == 1 and len(names) == len(wanted) and not failed:
            return parts
        return [failed.get(k) or {n: part[n] for n in r.requested_outputs}
                for k, (r, part) in enumerate(zip(requests, parts))]
