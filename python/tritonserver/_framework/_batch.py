"""One run for a batch of requests, as Triton's framework backends form it:
inputs stacked along the first dimension (ragged inputs flattened and
joined), the batch inputs the configuration asks for computed from the
requests, and the results split back per request (batch outputs scattered
by their source input's shape); a sequence's implicit states handed to the
core for its next request."""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from tritonserver import _datatypes as dt
from tritonserver._errors import InvalidArgumentError
from tritonserver._inprocess._request import update_states
from tritonserver._inprocess._response import Output

Prepare = Callable[[str, Any], Any]


class BatchInput:
    """A batch_input entry: a tensor the batcher computes from a source input."""

    __slots__ = ("targets", "kind", "dtype", "source")

    def __init__(self, entry: dict[str, Any]):
        self.targets = list(entry.get("target_name", []))
        self.kind = entry.get("kind", "BATCH_ELEMENT_COUNT")
        self.dtype = dt.to_numpy_dtype(dt.from_config_name(entry.get("data_type", "TYPE_INT32")))
        sources = entry.get("source_input", [])
        self.source = sources[0] if sources else ""

    def value(self, shapes: list[tuple[int, ...]]) -> np.ndarray[Any, Any]:
        """From the source input's shape in each request of the batch."""
        counts = [int(np.prod(s, dtype=np.int64)) for s in shapes]
        if self.kind == "BATCH_ELEMENT_COUNT":
            values: Any = counts
        elif self.kind == "BATCH_ACCUMULATED_ELEMENT_COUNT":
            values = np.cumsum(counts)
        elif self.kind == "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO":
            values = np.concatenate([[0], np.cumsum(counts)])
        elif self.kind == "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE":
            return np.zeros(max(counts, default=0), self.dtype)  # only its shape is read
        elif self.kind in ("BATCH_ITEM_SHAPE", "BATCH_ITEM_SHAPE_FLATTEN"):
            items = [list(s[1:]) for s in shapes for _ in range(s[0] if s else 1)]
            array = np.array(items, self.dtype).reshape(len(items), -1)
            return array.reshape(-1) if self.kind.endswith("FLATTEN") else array
        else:
            raise InvalidArgumentError(f"batch input kind {self.kind} is not supported")
        return np.asarray(values, self.dtype)


class Batcher:
    """What a model's configuration asks of each batch."""

    def __init__(self, config: dict[str, Any]):
        self.batching = int(config.get("max_batch_size", 0)) > 0
        self.ragged = frozenset(e["name"] for e in config.get("input", [])
                                if e.get("allow_ragged_batch"))
        self.batch_inputs = [BatchInput(e) for e in config.get("batch_input", [])]
        self.scatter = {name: (entry.get("source_input") or [""])[0]
                        for entry in config.get("batch_output", [])
                        for name in entry.get("target_name", [])
                        if entry.get("kind", "BATCH_SCATTER_WITH_INPUT_SHAPE")
                        == "BATCH_SCATTER_WITH_INPUT_SHAPE"}
        sequence = config.get("sequence_batching") or {}
        self.states = [(s["output_name"], int(dt.from_config_name(s.get("data_type", "TYPE_FP32"))))
                       for s in sequence.get("state", [])]
        self.state_outputs = [name for name, _ in self.states]
        self.plain = not (self.ragged or self.batch_inputs or self.scatter)
        order = [e["name"] for e in config.get("input", []) if e["name"] not in self.ragged]
        self._sized_by = order[0] if order else None

    def feed(self, requests: list[Any], prepare: Optional[Prepare]) -> dict[str, Any]:
        """The inputs of one run for `requests` (ValueError or KeyError when
        their inputs cannot be stacked; InvalidArgumentError when one is bad)."""
        feeds = [r.inputs if prepare is None else {n: prepare(n, v) for n, v in r.inputs.items()}
                 for r in requests]
        if len(feeds) == 1 and self.plain:
            return feeds[0]
        joined = {name: (np.concatenate([np.reshape(f[name], -1) for f in feeds])
                         if name in self.ragged else
                         feeds[0][name] if len(feeds) == 1 else
                         np.concatenate([f[name] for f in feeds]))
                  for name in feeds[0]}
        for batch_input in self.batch_inputs:
            shapes = [tuple(np.shape(r.inputs[batch_input.source])) for r in requests]
            value = batch_input.value(shapes)
            for target in batch_input.targets:
                joined[target] = value
        return joined

    def sizes(self, requests: list[Any]) -> list[int]:
        """Each request's rows of the batch (its first input's first dim)."""
        if self._sized_by is None:
            return [1] * len(requests)
        return [int(np.shape(r.inputs[self._sized_by])[0]) for r in requests]

    def split(self, requests: list[Any], names: list[str],
              results: list[Any]) -> list[dict[str, Any]]:
        """Each request's part of each result, by name."""
        if len(requests) == 1 and not self.scatter:
            return [dict(zip(names, results))]
        cuts = np.cumsum(self.sizes(requests))[:-1]
        parts: list[dict[str, Any]] = [{} for _ in requests]
        for name, result in zip(names, results):
            source = self.scatter.get(name)
            if source is None:
                pieces = np.split(result, cuts) if len(requests) > 1 else [result]
            else:
                pieces = _scatter(result, [tuple(np.shape(r.inputs[source])) for r in requests])
            for k, piece in enumerate(pieces):
                parts[k][name] = piece
        return parts

    def update_states(self, request: Any, part: dict[str, Any]) -> None:
        """The request's share of the state outputs becomes its sequence's state."""
        update_states(request, [
            Output(name, datatype, tuple(part[name].shape), np.ascontiguousarray(part[name]))
            for name, datatype in self.states])


def _scatter(result: Any, shapes: list[tuple[int, ...]]) -> list[Any]:
    """BATCH_SCATTER_WITH_INPUT_SHAPE: one row of the result per element of
    the source input; each request's rows take its source input's shape
    (followed by the rows' own dims)."""
    counts = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    total = sum(counts)
    result = np.asarray(result)
    if result.shape[:1] == (total,):
        flat, tail = result, tuple(result.shape[1:])
    else:
        if total == 0 or result.size % total:
            raise InvalidArgumentError(
                f"batch output of shape {list(result.shape)} cannot be scattered over source "
                f"inputs of {total} elements")
        flat = result.reshape(total, -1)
        tail = tuple(flat.shape[1:]) if flat.shape[1] != 1 else ()
        flat = flat.reshape((total,) + tail)
    ends = np.cumsum(counts)[:-1]
    return [piece.reshape(shape + tail) for piece, shape in zip(np.split(flat, ends), shapes)]
