"""What the inprocess backend calls (csrc/backends/inprocess), always with
the GIL held and on a core thread: load and finalize a model and its
instances, and run one batch. Everything a model does wrong becomes an
error for the load or for the requests concerned, never for the server."""

from __future__ import annotations

import asyncio
import json
import os
from typing import TYPE_CHECKING, Any, NoReturn, Optional

from tritonserver import _datatypes as dt
from tritonserver._enums import DataType
from tritonserver._framework import framework
from tritonserver._errors import (
    InternalError,
    TritonError,
    code_of,
    error_from_code,
    python_backend_summary,
    release_frames,
    summary,
)
from tritonserver import _stub_names
from tritonserver._inprocess import _async, _loader, _pb_autocomplete, _server_log
from tritonserver._inprocess._model import ModelInstance, PythonModel
from tritonserver._inprocess._request import ModelRequest, send

if TYPE_CHECKING:
    import numpy as np

    from tritonserver._inprocess._backend import RequestHandle


def _output_specs(config: dict[str, Any]) -> dict[str, tuple[int, Optional[np.dtype[Any]]]]:
    """name -> (datatype, numpy dtype or None) of the declared outputs."""
    specs = {}
    for output in config.get("output", []):
        data_type = dt.from_config_name(output.get("data_type", "TYPE_INVALID"))
        dtype = None if data_type in (DataType.BYTES, DataType.BF16) else dt.to_numpy_dtype(data_type)
        specs[output["name"]] = (int(data_type), dtype)
    return specs


def failure(model_name: str, hook: str, error: BaseException) -> tuple[int, str]:
    """(code, message) for an exception a model's hook raised (its frames
    released: only the message is kept)."""
    if isinstance(error, TritonError) and hook != "execute":
        release_frames(error)
        return code_of(error), f"model '{model_name}': {hook}: {error}"
    return code_of(error), f"model '{model_name}': {hook} raised {summary(error)}"


def execute_failure(loaded: "LoadedModel", instance: ModelInstance,
                    error: BaseException) -> tuple[int, str]:
    """(code, message) for an exception its execute raised: a python-backend
    model's in the python backend's words, which clients and Triton's
    tests read ("Failed to process the request(s) for model '<instance>',
    message: ...")."""
    if not loaded.python_backend:
        return failure(loaded.name, "execute", error)
    return code_of(error), (f"Failed to process the request(s) for model '{instance.name}', "
                            f"message: {python_backend_summary(error)}")


class LoadedModel:
    """One load of a model: its object and what the hot path needs."""

    __slots__ = ("name", "version", "config", "decoupled", "outputs", "model", "execute_fn",
                 "python_backend")

    def __init__(self, name: str, version: int, config: dict[str, Any], model: PythonModel,
                 python_backend: bool = False):
        self.name = name
        self.python_backend = python_backend  # the python backend's model (its checks)
        self.version = version
        self.config = config
        self.decoupled = bool(config.get("model_transaction_policy", {}).get("decoupled"))
        self.outputs = _output_specs(config)
        self.model = model
        self.execute_fn = model.execute


def _raise(model_name: str, hook: str, error: BaseException) -> NoReturn:
    code, message = failure(model_name, hook, error)
    raise error_from_code(code, message) from None


def _string_parameters(config: dict[str, Any]) -> dict[str, str]:
    return {key: value.get("string_value", "")
            for key, value in config.get("parameters", {}).items()}


def _backend_file(config: dict[str, Any], place: tuple[str, str, int]) -> Optional[str]:
    """The model.py of a python-based backend (``<backend folder>/<name>/model.py``,
    the core's ``runtime: "model.py"``) that runs this model, else None."""
    if config.get("runtime") != "model.py":
        return None
    return os.path.join(place[1], "model.py")


def complete_config(name: str, version: int, config_json: str, repository_path: str,
                    backend_settings_json: str, place: tuple[str, str, int]) -> Optional[str]:
    """The model configuration completed by its runtime (the server allows
    it: Options.strict_model_config=False), or None to keep it: a framework
    model's by its framework; a python-backend model.py's by its
    ``TritonPythonModel.auto_complete_config``, as the python backend does
    (the core takes max_batch_size, inputs, outputs, a scheduler where none
    is configured, and decoupled from what is returned)."""
    config = json.loads(config_json)
    try:
        backend = framework(config.get("backend"))
    except Exception as e:
        _raise(name, "finding its backend", e)
    if backend is None:
        if place[0] != "inprocess":
            # The python backend names its auto-complete stub after the model.
            _stub_names.check(name)
        completed = _pb_autocomplete.complete(name, version, config, repository_path,
                                              _backend_file(config, place), _raise)
        return None if completed is None or completed == config else json.dumps(completed)
    settings = json.loads(backend_settings_json).get("cmdline", {})
    try:
        completed = backend.complete(name, version, config, repository_path, settings)
    except Exception as e:
        _raise(name, "completing its configuration", e)
    return None if completed is None else json.dumps(completed)


def load_model(name: str, version: int, config_json: str, repository_path: str,
               place: tuple[str, str, int]) -> LoadedModel:
    """The model's object, initialized. ``place``: the name and folder of
    the backend that runs it (inprocess, python, or a python-based backend)
    and the address of its server's core."""
    config = json.loads(config_json)
    parameters = _string_parameters(config)
    try:
        backend = framework(config.get("backend"))
        if backend is not None:
            model: PythonModel = backend()
        else:
            model = _loader.make(name, version, repository_path, parameters,
                                 config.get("default_model_filename", ""),
                                 _backend_file(config, place),
                                 python_backend=place[0] != "inprocess")
    except Exception as e:
        _raise(name, "loading its Python class", e)
    model.name, model.version, model.config = name, version, config
    model.parameters, model.repository_path = parameters, repository_path
    model.server_address = place[2]
    try:
        model.initialize()
    except Exception as e:
        _raise(name, "initialize", e)
    return LoadedModel(name, version, config, model, python_backend=place[0] != "inprocess")


def finalize_model(loaded: LoadedModel) -> None:
    try:
        loaded.model.finalize()
    except Exception as e:
        _raise(loaded.name, "finalize", e)


def initialize_instance(loaded: LoadedModel, name: str, kind: str, device_id: int) -> ModelInstance:
    if loaded.python_backend:
        _stub_names.check(name)  # the python backend names each stub after its instance
    instance = ModelInstance(name, kind, device_id)
    try:
        loaded.model.initialize_instance(instance)
    except Exception as e:
        _raise(loaded.name, "initialize_instance", e)
    return instance


def finalize_instance(loaded: LoadedModel, instance: ModelInstance) -> None:
    _async.stop(instance)
    try:
        loaded.model.finalize_instance(instance)
    except Exception as e:
        _raise(loaded.name, "finalize_instance", e)


def execute(loaded: LoadedModel, instance: ModelInstance, handles: list[RequestHandle]) -> None:
    """One batch. Every request ends answered, or (decoupled) held by the
    model's sender; the backend fails any request left unanswered. An
    ``async def execute``'s coroutine runs on the models' event loop
    (tritonserver._inprocess._async) and answers its requests when it
    returns: the instance takes its next batch meanwhile."""
    requests = [ModelRequest(h, instance, loaded) for h in handles]
    try:
        responses = loaded.execute_fn(requests)
    except Exception as e:
        code, message = execute_failure(loaded, instance, e)
        del e, requests
        _fail_open(handles, code, message)
        return
    del requests
    if asyncio.iscoroutine(responses):
        for handle in handles:
            handle.defer()
        _async.run(instance, responses,
                   lambda result, error: answer(loaded, instance, handles, result, error))
        return
    answer(loaded, instance, handles, responses, None)


def answer(loaded: LoadedModel, instance: ModelInstance, handles: list[RequestHandle],
           responses: Any, error: Optional[BaseException]) -> None:
    """Answers a batch with what its execute returned (or raised)."""
    if error is not None:
        code, message = execute_failure(loaded, instance, error)
        del error
        _fail_open(handles, code, message)
        return
    if responses is None:
        if loaded.decoupled:
            return
        # As in the python backend: None leaves each request to its response
        # sender. A request whose sender the model never took cannot be
        # answered, so it fails now (the python backend would leave it, and
        # the model's unload, waiting forever).
        for handle in handles:
            if not handle.finished and not handle.rescheduled and not handle.held:
                handle.fail(*_internal(
                    f"model '{loaded.name}': execute returned None, and no response sender "
                    "was taken for this request; return one response per request (a list), "
                    "or send each request's response with its response sender"))
        return
    try:
        responses = list(responses)
    except TypeError:
        _fail_open(handles, *_internal(
            f"model '{loaded.name}': execute must return a list of responses, not "
            f"{type(responses).__name__}"))
        return
    if len(responses) != len(handles):
        _fail_open(handles, *_internal(
            f"model '{loaded.name}': execute returned {len(responses)} responses for "
            f"{len(handles)} requests; return exactly one per request, in order"))
        return
    for handle, response in zip(handles, responses):
        if handle.finished:
            continue  # a decoupled request its sender already finished
        if response is None:
            if not loaded.decoupled and not handle.rescheduled and not handle.held:
                handle.fail(*_internal(f"model '{loaded.name}': execute returned None for "
                                       "this request"))
            continue
        if handle.rescheduled:
            handle.set_rescheduled(False)
            handle.fail(*_internal(
                "Expected a None object in the execute function return list for reschduled "
                f"request, found type '{type(response)}'."))
            continue
        try:
            send(loaded, handle, response, True)
        except Exception as e:
            if not handle.finished:
                handle.fail(*failure(loaded.name, "execute's response", e))


def _fail_open(handles: list[RequestHandle], code: int, message: str) -> None:
    """Fail the batch's requests not answered yet. A failure that reaches
    none of them (a decoupled model finished them all, then raised) is a
    line of the server's log instead, as the python backend writes it."""
    open_handles = [h for h in handles if not h.finished]
    for handle in open_handles:
        handle.fail(code, message)
    if not open_handles:
        _server_log.write(_server_log.ERROR, f"Failed to process the request(s): {message}",
                          __file__, 0)


def _internal(message: str) -> tuple[int, str]:
    return code_of(InternalError(message)), message
