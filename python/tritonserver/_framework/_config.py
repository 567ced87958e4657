"""Model configurations of framework models: completed from the model when
the server allows it (Options.strict_model_config=False) and checked
against it always, with the texts Triton's framework backends give. What
differs between frameworks is a `Completion` (how a backend fills a config)
and the tensors its module reads from the model."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, NamedTuple, Optional

from tritonserver._errors import InvalidArgumentError

# The sequence batcher's control kinds: each present kind is one more model input.
CONTROL_KINDS = ("CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_READY",
                 "CONTROL_SEQUENCE_CORRID")


class Tensor(NamedTuple):
    """An input or output as the model declares it (dims: -1 where free)."""

    name: str
    config_type: str
    dims: list[int]


@dataclass(frozen=True)
class Completion:
    """How a framework's backend completes a configuration.

    `default_max_batch_size`: the backend's default of the
    default-max-batch-size setting; `at_least_one`: a batching model gets at
    least 1 (OpenVINO) even when the setting says 0; `per_entry`: entries
    listed without a data type or dims are filled (ONNX Runtime) rather than
    only whole empty lists (OpenVINO); `refuse_unbatchable`: a non-zero
    max_batch_size for a model that cannot batch fails (ONNX Runtime) rather
    than only warning (OpenVINO); `batching_when_listed`: max_batch_size is
    completed even when inputs and outputs are listed (OpenVINO)."""

    backend: str
    default_max_batch_size: int
    at_least_one: bool = False
    per_entry: bool = True
    refuse_unbatchable: bool = True
    batching_when_listed: bool = False


def sequence_inputs(config: dict[str, Any]) -> list[str]:
    """The inputs the core adds to each request of a sequence: its control
    tensors and implicit states (sequence_batching), in config order."""
    sequence = config.get("sequence_batching") or {}
    names = [tensor["name"] for control in sequence.get("control_input", [])
             for tensor in [control] if control.get("control")]
    names += [state["input_name"] for state in sequence.get("state", [])]
    return names


def batch_inputs(config: dict[str, Any]) -> list[str]:
    """The inputs the batcher computes (batch_input target names)."""
    return [name for entry in config.get("batch_input", []) for name in entry.get("target_name", [])]


def expected_inputs(config: dict[str, Any]) -> int:
    """How many model inputs a configuration accounts for, as Triton's
    onnxruntime and pytorch backends count them: the inputs that are not
    optional, one per batch input and per sequence control or state."""
    required = [e for e in config.get("input", []) if not e.get("optional")]
    return len(required) + len(batch_inputs(config)) + len(sequence_inputs(config))


def complete(name: str, how: Completion, config: dict[str, Any], inputs: list[Tensor],
             outputs: list[Tensor], batchable: bool,
             default_max_batch_size: Optional[str]) -> Optional[dict[str, Any]]:
    """The configuration completed from the model, or None when nothing is
    missing. A configuration that lists both inputs and outputs is left as it
    is. Otherwise what it says is kept and only what it lacks is filled:
    max_batch_size (when the model can batch, with dynamic batching), and
    the inputs or outputs (whole lists, or with `how.per_entry` an entry's
    data type and dims)."""
    if config.get("input") and config.get("output") and not how.batching_when_listed:
        return None
    log = logging.getLogger(f"tritonserver.{how.backend}")
    completed = dict(config)
    changed = False
    max_batch = int(completed.get("max_batch_size", 0))
    if batchable and max_batch == 0:
        try:
            max_batch = max(int(default_max_batch_size or how.default_max_batch_size), 0)
        except ValueError:
            raise InvalidArgumentError(
                f"backend setting default-max-batch-size: '{default_max_batch_size}' is not "
                "an integer") from None
        if how.at_least_one:
            max_batch = max(max_batch, 1)
        if max_batch > 0:
            completed["max_batch_size"] = max_batch
            changed = True
            # Said at every load: a request with more rows than this is refused
            # ("inference request batch-size must be <= N"), which surprises
            # whoever sends a whole dataset at once.
            log.warning("model '%s': max_batch_size set to %d (the default-max-batch-size "
                        "backend setting; the model can batch): a request of more than %d rows "
                        "is refused. For larger batches write max_batch_size in its "
                        "config.pbtxt, or raise the default: serve --backend-config=%s,"
                        "default-max-batch-size=N, or Server(backend_configuration={'%s': "
                        "{'default-max-batch-size': 'N'}})", name, max_batch, max_batch,
                        how.backend, how.backend)
    elif not batchable and max_batch != 0:
        if how.refuse_unbatchable:
            raise InvalidArgumentError(
                f"autofill failed for model '{name}': the model does not support batching (an "
                "input or output has no free first dimension) while non-zero max_batch_size "
                f"{max_batch} is specified")
        log.warning("model layout for model %s does not support batching while non-zero "
                    "max_batch_size is specified", name)
    if max_batch > 1 and not ("dynamic_batching" in completed
                              or "sequence_batching" in completed):
        completed["dynamic_batching"] = {}
        changed = True
    for key, tensors in (("input", inputs), ("output", outputs)):
        listed = completed.get(key) or []
        if listed and not how.per_entry:
            log.info("skipping %s model configuration auto-complete for '%s': %s already "
                     "specified", key, name, key)
            continue
        entries, filled = _complete_entries(listed, tensors, max_batch)
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


def check_optional(name: str, config: dict[str, Any]) -> None:
    """Optional inputs are for models that do not batch (Triton's text)."""
    if int(config.get("max_batch_size", 0)) > 0:
        for entry in config.get("input", []):
            if entry.get("optional"):
                raise InvalidArgumentError(
                    f"unable to load model '{name}', optional input '{entry.get('name', '')}' "
                    "is not supported for models that support batching")


def check_count(name: str, config: dict[str, Any], model_inputs: list[str],
                count_sequence: bool = True) -> None:
    """The configuration must account for every model input: its required
    inputs, batch inputs and (`count_sequence`) sequence controls and states."""
    expected = (expected_inputs(config) if count_sequence else
                len([e for e in config.get("input", []) if not e.get("optional")]))
    if expected != len(model_inputs):
        raise InvalidArgumentError(
            f"unable to load model '{name}', configuration expects {expected} inputs, model "
            f"provides {len(model_inputs)} ({', '.join(model_inputs) or 'none'})")


def check(name: str, config: dict[str, Any], inputs: list[Tensor], outputs: list[Tensor],
          exact_types: bool = True, count_sequence: bool = True,
          defaulted: tuple[Tensor, ...] = ()) -> None:
    """The configuration must agree with the model: the number of inputs,
    names, data types (`exact_types`: the framework cannot convert) and dims
    (a free model dim accepts any input dim; outputs match exactly).
    `defaulted`: inputs the model has a default for (ONNX's overridable
    initializers), which the configuration may list as optional."""
    check_optional(name, config)
    check_count(name, config, [t.name for t in inputs], count_sequence)
    max_batch = int(config.get("max_batch_size", 0))
    # Ragged inputs and scattered batch outputs have shapes of the batch, not of a request.
    free = {e.get("name") for e in config.get("input", []) if e.get("allow_ragged_batch")}
    free |= {n for e in config.get("batch_output", []) for n in e.get("target_name", [])}
    for kind, listed, tensors in (("input", config.get("input", []), inputs + list(defaulted)),
                                  ("output", config.get("output", []), outputs)):
        by_name = {t.name: t for t in tensors}
        for entry in listed:
            tensor = by_name.get(entry.get("name", ""))
            if tensor is None:
                raise unexpected(name, kind, entry.get("name", ""), sorted(by_name))
            declared = entry.get("data_type", "TYPE_INVALID")
            if exact_types and declared != tensor.config_type:
                raise InvalidArgumentError(
                    f"unable to load model '{name}': the configuration expects datatype "
                    f"{declared} for {kind} '{tensor.name}', the model provides "
                    f"{tensor.config_type}")
            if tensor.name not in free:
                _check_dims(name, kind, entry, tensor, max_batch)


def unexpected(name: str, kind: str, tensor: str, allowed: list[str]) -> InvalidArgumentError:
    """A configuration names an input or output the model lacks (Triton's text)."""
    return InvalidArgumentError(
        f"unable to load model '{name}': unexpected inference {kind} '{tensor}', allowed "
        f"{kind}s are: {', '.join(allowed) or 'none'}")


def config_dims(entry: dict[str, Any]) -> list[int]:
    """An entry's dims as the model sees them: its reshape's shape when it has one."""
    reshape = entry.get("reshape")
    return [int(d) for d in (reshape.get("shape", []) if reshape is not None
                             else entry.get("dims", []))]


def _check_dims(name: str, kind: str, entry: dict[str, Any], tensor: Tensor,
                max_batch: int) -> None:
    dims = config_dims(entry)
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
