"""A configuration made into a compiled OpenVINO model, as Triton's
openvino backend makes it: its parameters (flags true only for "yes",
CPU properties checked with the backend's texts), the model's inputs and
outputs converted to the configuration's types and shapes, a static batch
of max_batch_size."""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from tritonserver._errors import InvalidArgumentError
from tritonserver._framework import _config as _checks
from tritonserver._framework._config import check_count
from tritonserver._openvino import _config

log = logging.getLogger("tritonserver.openvino")

# The CPU properties the backend passes on, in its order.
CPU_PARAMETERS = ("INFERENCE_NUM_THREADS", "COMPILATION_NUM_THREADS", "HINT_BF16",
                  "NUM_STREAMS", "PERFORMANCE_HINT")


class Flags(NamedTuple):
    skip_dynamic_batch: bool
    batch_padding: bool
    reshape_io: bool


def flags(parameters: dict[str, str]) -> Flags:
    """SKIP_OV_DYNAMIC_BATCHSIZE, ENABLE_BATCH_PADDING, RESHAPE_IO_LAYERS:
    true for "yes" in any case, false for anything else (never an error)."""

    def on(key: str) -> bool:
        return parameters.get(key, "").lower() == "yes"

    return Flags(on("SKIP_OV_DYNAMIC_BATCHSIZE"), on("ENABLE_BATCH_PADDING"),
                 on("RESHAPE_IO_LAYERS"))


def cpu_properties(parameters: dict[str, str]) -> dict[str, Any]:
    """The CPU properties the parameters ask for (values lower-cased, as
    the backend reads them); InvalidArgumentError with its texts."""
    properties: dict[str, Any] = {}
    for key in CPU_PARAMETERS:
        value = parameters.get(key, "").lower()
        if not value:
            continue
        if key in ("INFERENCE_NUM_THREADS", "COMPILATION_NUM_THREADS"):
            if not value.isdigit():
                raise InvalidArgumentError(
                    f"expected the parameter '{key}' to be a non-negative number, got {value}")
            properties[key] = int(value)
        elif key == "HINT_BF16":
            if value != "yes":
                raise InvalidArgumentError(
                    f"expected the parameter '{key}' to be YES, got {value}")
            properties["INFERENCE_PRECISION_HINT"] = "bf16"
        elif key == "NUM_STREAMS":
            if value in ("auto", "numa"):
                properties[key] = value.upper()
            elif value.isdigit():
                properties[key] = int(value)
            else:
                raise InvalidArgumentError(
                    f"expected the parameter '{key}' to be either AUTO/NUMA/<int_value>, "
                    f"got {value}")
        else:
            if value not in ("latency", "throughput", "cumulative_throughput"):
                raise InvalidArgumentError(
                    f"expected the parameter '{key}' to be LATENCY/THROUGHPUT/"
                    f"CUMULATIVE_THROUGHPUT, got {value}")
            properties[key] = value.upper()
    return properties


def configure(ov: Any, name: str, model: Any, config: dict[str, Any], how: Flags) -> Any:
    """The model checked against the configuration and shaped by it (Triton's
    ValidateInputs / ValidateOutputs): types converted to the configured
    ones, inputs reshaped to the configured dims with RESHAPE_IO_LAYERS,
    layout N... and the batch set to max_batch_size when batching."""
    max_batch = int(config.get("max_batch_size", 0))
    entries = config.get("input", [])
    check_count(name, {"input": entries}, [p.get_any_name() for p in model.inputs],
                count_sequence=False)
    shapes = {p.get_any_name(): p.get_partial_shape() for p in model.inputs}
    ppp = ov.preprocess.PrePostProcessor(model)
    for entry in entries:
        tensor = entry.get("name", "")
        _config.check_name(name, "input", tensor, list(shapes))
        element = _config.element(name, "input", tensor, entry.get("data_type", "TYPE_INVALID"))
        port = ppp.input(tensor).tensor()
        port.set_element_type(getattr(ov.Type, element))
        dims = _checks.config_dims(entry)
        if how.reshape_io:
            shape = shapes[tensor]
            index = 1 if max_batch else 0
            for dim in dims:
                if dim > 0:
                    shape[index] = ov.Dimension(dim)
                elif dim == -1:
                    shape[index] = ov.Dimension()
                else:
                    raise InvalidArgumentError(
                        "openvino backend does not support dimensions values other than `-1` "
                        "or positive integers")
                index += 1
            port.set_shape(shape)
        else:
            _config.check_dims(name, tensor, shapes[tensor], dims, max_batch, exact=False)
        if max_batch:
            port.set_layout(ov.Layout("N..."))
    model = _build(name, ppp, "input")
    if max_batch:
        try:
            ov.set_batch(model, max_batch)
        except Exception as e:
            raise InvalidArgumentError(
                f"model '{name}': OpenVINO could not set its batch to max_batch_size "
                f"{max_batch}: {e}") from None
    shapes = {p.get_any_name(): p.get_partial_shape() for p in model.outputs}
    ppp = ov.preprocess.PrePostProcessor(model)
    for entry in config.get("output", []):
        tensor = entry.get("name", "")
        _config.check_name(name, "output", tensor, list(shapes))
        element = _config.element(name, "output", tensor,
                                  entry.get("data_type", "TYPE_INVALID"))
        ppp.output(tensor).tensor().set_element_type(getattr(ov.Type, element))
        _config.check_dims(name, tensor, shapes[tensor], _checks.config_dims(entry), max_batch,
                           exact=True)
    return _build(name, ppp, "output")


def _build(name: str, ppp: Any, what: str) -> Any:
    try:
        return ppp.build()
    except Exception as e:  # OpenVINO's own exception types
        raise InvalidArgumentError(
            f"model '{name}': OpenVINO could not apply the model {what} preprocessing: "
            f"{e}") from None


def compile_model(core: Any, name: str, model: Any, properties: dict[str, Any],
                  auto_batching: bool) -> Any:
    """The model compiled for the CPU, the properties set on the core's CPU
    device first (as the backend does). A property this OpenVINO's CPU
    plugin does not know (COMPILATION_NUM_THREADS in recent releases) is
    left out with a warning."""
    try:
        known = set(core.get_property("CPU", "SUPPORTED_PROPERTIES"))
        device = {}
        for key, value in properties.items():
            if key in known:
                device[key] = value
            else:
                log.warning("model '%s': parameter %s ignored: this OpenVINO's CPU plugin does "
                            "not support it", name, key)
        if device:
            core.set_property("CPU", device)
    except Exception as e:
        raise InvalidArgumentError(f"model '{name}': configuring openvino core: {e}") from None
    try:
        compiled = core.compile_model(model, "CPU", {"ALLOW_AUTO_BATCHING": auto_batching})
    except Exception as e:
        raise InvalidArgumentError(
            f"model '{name}': OpenVINO could not compile it for the CPU: {e}") from None
    log.info("model '%s': compiled for the CPU with %s", name,
             ", ".join(f"{k}={v}" for k, v in properties.items()) or "OpenVINO's defaults")
    return compiled
