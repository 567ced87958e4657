"""Custom metrics for python-backend models run in-process:
``pb_utils.MetricFamily(name, description, kind)`` and its
``Metric(labels, buckets)``, on the core's custom-metrics API (the
inprocess backend's MetricFamily and Metric types), so they appear on the
server's ``/metrics`` beside Triton's own. A metric lives while the model
holds it, its family's series in the core while it or any of its metrics is
held; but as in the python backend (2024 onwards), a metric whose
``MetricFamily`` object the model deleted refuses every operation."""

from __future__ import annotations

import enum
import weakref
from typing import Any, Callable, Optional, TypeVar

from tritonserver._errors import TritonError as _ServerError
from tritonserver._inprocess._pb_types import TritonModelException

T = TypeVar("T")


class MetricKind(enum.IntEnum):
    """The kinds of a metric family (the core's TRITONSERVER_MetricKind)."""

    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


def _backend() -> Any:
    try:
        from tritonserver._inprocess import _backend
    except ImportError:
        raise TritonModelException(
            "custom metrics are made by models that the server runs in-process (the "
            "inprocess backend is not loaded in this process)") from None
    return _backend


def _core(call: Callable[[], T]) -> T:
    try:
        return call()
    except _ServerError as e:
        raise TritonModelException(str(e)) from None


# The python backend's text for a metric used after its family was deleted.
FAMILY_DELETED = "Invalid metric operation as the corresponding 'MetricFamily' has been deleted."


class Metric:
    """One metric: a family's series for one set of labels."""

    def __init__(self, made: Any, family: "MetricFamily"):
        self._metric = made
        self._family = weakref.ref(family)

    def _made(self) -> Any:
        if self._family() is None:
            raise TritonModelException(FAMILY_DELETED)
        return self._metric

    def increment(self, value: float) -> None:
        metric = self._made()
        _core(lambda: metric.increment(float(value)))

    def set(self, value: float) -> None:
        metric = self._made()
        _core(lambda: metric.set(float(value)))

    def observe(self, value: float) -> None:
        metric = self._made()
        _core(lambda: metric.observe(float(value)))

    def value(self) -> float:
        return float(_core(self._made().value))


class MetricFamily:
    """``MetricFamily(name, description, kind)``: kind is
    ``MetricFamily.COUNTER``, ``GAUGE`` or ``HISTOGRAM``."""

    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name: str, description: str, kind: Any):
        if not isinstance(name, str) or not isinstance(description, str):
            raise TypeError("MetricFamily: name and description must be str")
        try:
            kind = MetricKind(kind)
        except ValueError:
            raise TritonModelException(f"MetricFamily: unknown metric kind {kind!r}") from None
        self._family = _core(lambda: _backend().MetricFamily(int(kind), name, description))

    def Metric(self, labels: Optional[dict[str, str]] = None,  # noqa: N802 (the API's name)
               buckets: Optional[list[float]] = None) -> Metric:
        labels = dict(labels or {})
        for key, value in labels.items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise TypeError("Metric: labels must map str to str")
        floats = None if buckets is None else [float(b) for b in buckets]
        return Metric(_core(lambda: _backend().Metric(self._family, labels, floats)), self)
