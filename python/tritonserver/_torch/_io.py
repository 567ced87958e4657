"""How a configuration's tensors meet a TorchScript module, by Triton's
pytorch backend's rules (its texts too): inputs bound to forward()'s
arguments by argument name, else by the <name>__<index> convention, else in
configuration order (with a warning); a single Dict[str, Tensor] argument
takes every input by name; outputs picked from the results by
<name>__<index>, else in configuration order. Sequence controls and states
must follow <name>__<index>. Checked once per load, before any run."""

from __future__ import annotations

import logging
from typing import Any, NamedTuple, Optional

from tritonserver._errors import InternalError, InvalidArgumentError
from tritonserver._framework._config import batch_inputs, check_count
from tritonserver._torch._types import check_supported

log = logging.getLogger("tritonserver.pytorch")

FORWARD_ARGUMENT, NAMED_INDEX, STRICT_ORDER = "forward argument", "named index", "strict order"


class Argument(NamedTuple):
    """One forward() argument (self left out): its name, kind
    (TensorType, ListType, DictType...) and type as torch spells it."""

    name: str
    kind: str
    type: str


class Bindings(NamedTuple):
    """What a run needs: input name -> forward() position (or dict key when
    `dict_input`), output name -> index in the results, forward()'s arity."""

    dict_input: bool
    arity: int
    inputs: dict[str, int]
    outputs: dict[str, int]


def forward_arguments(module: Any) -> list[Argument]:
    """forward()'s arguments, `self` left out."""
    arguments = list(module._c._get_method("forward").schema.arguments)
    if arguments and arguments[0].type.kind() == "ClassType":
        arguments = arguments[1:]
    return [Argument(a.name, a.type.kind(), str(a.type)) for a in arguments]


def named_index(name: str) -> Optional[int]:
    """N of <name>__N (the first "__" splits, as in Triton), else None."""
    at = name.find("__")
    suffix = name[at + 2:] if at >= 0 else ""
    return int(suffix) if suffix.isascii() and suffix.isdigit() else None


def _convention(names: list[str], allowed: list[str]) -> str:
    if allowed and all(n in allowed for n in names):
        return FORWARD_ARGUMENT
    if all(named_index(n) is not None for n in names):
        return NAMED_INDEX
    return STRICT_ORDER


def _strict_warning(kind: str, model: str, names: list[str]) -> None:
    """Triton's warning, naming the first tensor that breaks the convention."""
    first = next((n for n in names if named_index(n) is None), names[-1])
    if kind == "input":
        log.warning("input '%s' or previous input(s) are neither an input argument to the "
                    "model '%s' nor do they follow the <name>__<index> naming convention. "
                    "Falling back to enforcing strict ordering from model configuration.",
                    first, model)
    else:
        log.warning("output '%s' or previous output(s) of the model '%s' do not follow the "
                    "<name>__<index> naming convention. Falling back to enforcing strict "
                    "ordering from model configuration.", first, model)


def _string_dims(model: str, kind: str, entry: dict[str, Any], batching: bool) -> None:
    """A TYPE_STRING tensor is one List[str]: one dimension, batch included."""
    reshape = entry.get("reshape")
    dims = reshape.get("shape", []) if reshape is not None else entry.get("dims", [])
    if len(dims) + (1 if batching else 0) > 1:
        raise InternalError(
            f"Triton only supports 1 dimensional List of String as {kind} for "
            f"'{entry.get('name', '')}' for model '{model}'")


def _controls(config: dict[str, Any]) -> dict[str, int]:
    """The sequence control inputs, each bound by its <name>__<index>."""
    bound = {}
    for control in (config.get("sequence_batching") or {}).get("control_input", []):
        if not control.get("control"):
            continue
        name = control.get("name", "")
        index = named_index(name)
        if index is None:
            raise InternalError(
                f"input '{name}' does not follow <name>__<index> naming convention.")
        bound[name] = index
    return bound


def _check_states(model: str, config: dict[str, Any], convention: str) -> list[dict[str, Any]]:
    states: list[dict[str, Any]] = (config.get("sequence_batching") or {}).get("state", [])
    if states and convention != NAMED_INDEX:
        raise InvalidArgumentError(
            f"PyTorch model '{model}' is using sequence batching with state but not all "
            "inputs and outputs follow the <name>__<index> naming convention.")
    for state in states:
        for key in ("input_name", "output_name"):
            if named_index(state.get(key, "")) is None:
                raise InvalidArgumentError(
                    f"PyTorch model '{model}' is using sequence batching with state but state "
                    f"'{state.get(key, '')}' does not follow the <name>__<index> naming "
                    "convention.")
    return states


def bind(model: str, config: dict[str, Any], arguments: list[Argument]) -> Bindings:
    """Check the configuration against forward()'s arguments and bind them."""
    batching = int(config.get("max_batch_size", 0)) > 0
    bound = _controls(config)
    dict_input = len(arguments) == 1 and arguments[0].kind == "DictType"
    allowed: list[str] = []
    if not dict_input:
        if any(a.kind == "DictType" for a in arguments):
            raise InternalError(
                "Multiple inputs of kind DictType were detected. Only a single input of type "
                "Dict(str, Tensor) is supported.")
        for argument in arguments:
            if argument.kind not in ("TensorType", "ListType"):
                raise InternalError(
                    f"An input of type '{argument.type}' was detected in the model. Only a "
                    "single input of type Dict(str, Tensor) or input(s) of type Tensor are "
                    "supported.")
        allowed = [a.name for a in arguments]
    entries = config.get("input", [])
    if not entries:
        # Before the count (Triton counts first): for a model without a
        # configuration this says what is missing.
        raise InternalError(
            "model configuration must contain at least one input, none were specified.")
    if not dict_input:
        check_count(model, config, allowed)
    names = [e.get("name", "") for e in entries]
    convention = _convention(names, allowed)
    if convention == STRICT_ORDER and not dict_input:
        _strict_warning("input", model, names)
    for position, entry in enumerate(entries):
        name = entry.get("name", "")
        check_supported(model, "input", name, entry.get("data_type", "TYPE_INVALID"))
        if entry.get("data_type") == "TYPE_STRING":
            _string_dims(model, "input", entry, batching)
        bound[name] = _position(convention, allowed, name, position)
    states = _check_states(model, config, NAMED_INDEX if dict_input else convention)
    for state in states:
        check_supported(model, "input state", state["input_name"],
                        state.get("data_type", "TYPE_INVALID"))
        bound[state["input_name"]] = named_index(state["input_name"]) or 0
    for offset, target in enumerate(batch_inputs(config)):
        bound[target] = _position(convention, allowed, target, len(entries) + offset)
    if not dict_input:
        _one_to_one(model, bound, allowed)
    outputs = _outputs(model, config, batching, states)
    return Bindings(dict_input, len(arguments), bound, outputs)


def _position(convention: str, allowed: list[str], name: str, position: int) -> int:
    if convention == FORWARD_ARGUMENT:
        return allowed.index(name) if name in allowed else -1
    if convention == NAMED_INDEX:
        index = named_index(name)
        return -1 if index is None else index
    return position


def _one_to_one(model: str, bound: dict[str, int], allowed: list[str]) -> None:
    """Each forward() argument gets exactly one input (Triton would fail at
    the first run instead)."""
    by_position: dict[int, list[str]] = {}
    for name, position in bound.items():
        by_position.setdefault(position, []).append(name)
    for position, names in sorted(by_position.items()):
        if not 0 <= position < len(allowed):
            raise InvalidArgumentError(
                f"unable to load model '{model}': input '{names[0]}' refers to forward() "
                f"argument {position}, which does not exist (the model takes "
                f"{len(allowed)}: {', '.join(allowed)})")
        if len(names) > 1:
            raise InvalidArgumentError(
                f"unable to load model '{model}': inputs {', '.join(names)} all refer to "
                f"forward() argument {position} ('{allowed[position]}')")


def _outputs(model: str, config: dict[str, Any], batching: bool,
             states: list[dict[str, Any]]) -> dict[str, int]:
    entries = config.get("output", [])
    if not entries:
        raise InternalError(
            "model configuration must contain at least one output, none were specified.")
    names = [e.get("name", "") for e in entries]
    convention = _convention(names, [])
    if convention == STRICT_ORDER:
        _strict_warning("output", model, names)
    if states and convention != NAMED_INDEX:
        _check_states(model, config, convention)  # raises
    outputs = {}
    for position, entry in enumerate(entries):
        name = entry.get("name", "")
        check_supported(model, "output", name, entry.get("data_type", "TYPE_INVALID"))
        if entry.get("data_type") == "TYPE_STRING":
            _string_dims(model, "output", entry, batching)
        outputs[name] = _position(convention, [], name, position)
    for state in states:
        check_supported(model, "state", state["output_name"],
                        state.get("data_type", "TYPE_INVALID"))
        outputs[state["output_name"]] = named_index(state["output_name"]) or 0
    return outputs
