"""The model configuration of an ONNX model: completed from the model when
the server allows it (Options.strict_model_config=False), checked against
the model always, as Triton's ONNX Runtime backend does."""

from __future__ import annotations

import logging
from typing import Any, NamedTuple, Optional

from tritonserver._errors import InvalidArgumentError, UnsupportedError

log = logging.getLogger("tritonserver.onnxruntime")

# ONNX Runtime's tensor type strings <-> Triton's configuration types.
CONFIG_TYPE = {
    "tensor(bool)": "TYPE_BOOL", "tensor(uint8)": "TYPE_UINT8", "tensor(uint16)": "TYPE_UINT16",
    "tensor(uint32)": "TYPE_UINT32", "tensor(uint64)": "TYPE_UINT64", "tensor(int8)": "TYPE_INT8",
    "tensor(int16)": "TYPE_INT16", "tensor(int32)": "TYPE_INT32", "tensor(int64)": "TYPE_INT64",
    "tensor(float16)": "TYPE_FP16", "tensor(float)": "TYPE_FP32", "tensor(double)": "TYPE_FP64",
    "tensor(string)": "TYPE_STRING",
}
DEFAULT_MAX_BATCH_SIZE = 4  # Triton's backend default ("default-max-batch-size")


class Tensor(NamedTuple):
    """An input or output as the model declares it (dims: -1 where free)."""

    name: str
    config_type: str
    dims: list[int]


def model_tensors(name: str, session: Any) -> tuple[list[Tensor], list[Tensor]]:
    """The model's inputs (initializers that may be overridden excluded) and outputs."""

    def read(args: Any) -> list[Tensor]:
        tensors = []
        for arg in args:
            config_type = CONFIG_TYPE.get(arg.type)
            if config_type is None:
                raise UnsupportedError(
                    f"model '{name}': '{arg.name}' is of type {arg.type}, which Triton's "
                    "ONNX Runtime backend does not support (tensors of bool, integers, "
                    "float16/32/64 and strings)" + _type_hint(arg.type))
            dims = [d if isinstance(d, int) and d >= 0 else -1 for d in arg.shape]
            tensors.append(Tensor(arg.name, config_type, dims))
        return tensors

    return read(session.get_inputs()), read(session.get_outputs())


def _type_hint(onnx_type: str) -> str:
    if onnx_type.startswith("seq(map("):
        # The default output of classifiers exported by skl2onnx and onnxmltools.
        return (". A sequence of maps is the ZipMap output of a classifier exported by "
                "skl2onnx or onnxmltools; export it without ZipMap to get the probabilities "
                "as a tensor: skl2onnx.to_onnx(model, X, options={\"zipmap\": False}) (also "
                "for LightGBM and XGBoost models converted through skl2onnx), or "
                "onnxmltools.convert_lightgbm(..., zipmap=False) (docs/onnx.md)")
    return ""


def _batchable(tensors: list[Tensor]) -> bool:
    return all(len(t.dims) >= 1 and t.dims[0] == -1 for t in tensors)


def complete(name: str, config: dict[str, Any], inputs: list[Tensor], outputs: list[Tensor],
             default_max_batch_size: Optional[str]) -> Optional[dict[str, Any]]:
    """The configuration completed from the model, or None when nothing is
    missing. As Triton's backend: a configuration that lists both inputs and
    outputs is left as it is. Otherwise what it says is kept and only what it
    lacks is filled: max_batch_size (when every input and output has a free
    first dimension, with dynamic batching), and the inputs or outputs
    (whole lists, or an entry's data type and dims)."""
    if config.get("input") and config.get("output"):
        return None
    completed = dict(config)
    changed = False
    max_batch = int(completed.get("max_batch_size", 0))
    batchable = _batchable(inputs + outputs)
    if batchable and max_batch == 0:
        try:
            max_batch = max(int(default_max_batch_size or DEFAULT_MAX_BATCH_SIZE), 0)
        except ValueError:
            raise InvalidArgumentError(
                f"backend setting default-max-batch-size: '{default_max_batch_size}' is not "
                "an integer") from None
        if max_batch > 0:
            completed["max_batch_size"] = max_batch
            changed = True
            # Said at every load: a request with more rows than this is refused
            # ("inference request batch-size must be <= N"), which surprises
            # whoever sends a whole dataset at once.
            log.warning("model '%s': max_batch_size set to %d (the default-max-batch-size "
                        "backend setting; every input and output has a free first dimension): a "
                        "request of more than %d rows is refused. For larger batches write "
                        "max_batch_size in its config.pbtxt, or raise the default: serve "
                        "--backend-config=onnxruntime,default-max-batch-size=N, or "
                        "Server(backend_configuration={'onnxruntime': "
                        "{'default-max-batch-size': 'N'}})", name, max_batch, max_batch)
    elif not batchable and max_batch != 0:
        raise InvalidArgumentError(
            f"autofill failed for model '{name}': the model does not support batching (an "
            "input or output has no free first dimension) while non-zero max_batch_size "
            f"{max_batch} is specified")
    if max_batch > 1 and not ("dynamic_batching" in completed
                              or "sequence_batching" in completed):
        completed["dynamic_batching"] = {}
        changed = True
    for key, tensors in (("input", inputs), ("output", outputs)):
        entries, filled = _complete_entries(completed.get(key) or [], tensors, max_batch)
        if filled:
            completed[key] = entries
            changed = True
    return completed if changed else None


def _complete_entries(entries: list[dict[str, Any]], tensors: list[Tensor],
                      max_batch: int) -> tuple[list[dict[str, Any]], bool]:
    def dims_of(tensor: Tensor) -> list[int]:
        return tensor.dims[1:] if max_batch > 0 else list(tensor.dims)

    if not entries:
        made = []
        for tensor in tensors:
            entry: dict[str, Any] = {"name": tensor.name, "data_type": tensor.config_type,
                                     "dims": dims_of(tensor) or [1]}
            if not dims_of(tensor) and max_batch > 0:
                entry["reshape"] = {"shape": []}
            made.append(entry)
        return made, bool(made)
    by_name = {t.name: t for t in tensors}
    out, filled = [], False
    for entry in entries:
        found = by_name.get(entry.get("name", ""))
        entry = dict(entry)
        if found is not None:
            tensor = found
            if entry.get("data_type", "TYPE_INVALID") == "TYPE_INVALID":
                entry["data_type"] = tensor.config_type
                filled = True
            if not entry.get("dims"):
                entry["dims"] = dims_of(tensor) or [1]
                filled = True
        out.append(entry)
    return out, filled


def check(name: str, config: dict[str, Any], inputs: list[Tensor],
          outputs: list[Tensor]) -> None:
    """The configuration must agree with the model: names, data types and
    dims (a free model dim accepts any input dim; outputs match exactly)."""
    max_batch = int(config.get("max_batch_size", 0))
    entries = config.get("input", [])
    required = [e for e in entries if not e.get("optional")]
    if len(required) != len(inputs):
        raise InvalidArgumentError(
            f"unable to load model '{name}': the configuration expects {len(required)} "
            f"inputs, the model provides {len(inputs)} "
            f"({', '.join(t.name for t in inputs) or 'none'})")
    for kind, listed, tensors in (("input", entries, inputs),
                                  ("output", config.get("output", []), outputs)):
        by_name = {t.name: t for t in tensors}
        for entry in listed:
            tensor = by_name.get(entry.get("name", ""))
            if tensor is None:
                raise InvalidArgumentError(
                    f"unable to load model '{name}': unexpected inference {kind} "
                    f"'{entry.get('name', '')}', allowed {kind}s are: "
                    f"{', '.join(sorted(by_name)) or 'none'}")
            declared = entry.get("data_type", "TYPE_INVALID")
            if declared != tensor.config_type:
                raise InvalidArgumentError(
                    f"unable to load model '{name}': the configuration expects datatype "
                    f"{declared} for {kind} '{tensor.name}', the model provides "
                    f"{tensor.config_type}")
            _check_dims(name, kind, entry, tensor, max_batch)


def _check_dims(name: str, kind: str, entry: dict[str, Any], tensor: Tensor,
                max_batch: int) -> None:
    reshape = entry.get("reshape")
    dims = [int(d) for d in (reshape.get("shape", []) if reshape is not None
                             else entry.get("dims", []))]
    if not tensor.dims and max_batch == 0:  # a scalar: dims [1] stand for it
        if any(d != 1 for d in dims):
            raise InvalidArgumentError(
                f"unable to load model '{name}': {kind} '{tensor.name}' is a scalar in the "
                f"model; its configuration dims must be [1], not {dims}")
        return
    full = ([-1] if max_batch > 0 else []) + dims
    if max_batch > 0 and (not tensor.dims or tensor.dims[0] != -1):
        raise InvalidArgumentError(
            f"unable to load model '{name}': {kind} '{tensor.name}' has shape {tensor.dims} "
            "in the model; with max_batch_size > 0 its first dimension must be free (-1)")
    exact = kind == "output"
    agree = len(full) == len(tensor.dims) and all(
        m == c or (m == -1 and not exact) for m, c in zip(tensor.dims, full))
    if not agree:
        batch_note = " (a batch dimension first, since max_batch_size > 0)" if max_batch else ""
        raise InvalidArgumentError(
            f"unable to load model '{name}': {kind} '{tensor.name}' has shape {tensor.dims} "
            f"in the model, but the configuration gives {full}{batch_note}")
