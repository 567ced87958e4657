"""Metrics as JSON, read from the core's Prometheus text.

Core 2.51 formats metrics as Prometheus text only, so MetricFormat.JSON is
this package's own: Server.metrics() asks the core for text and turns it
into one JSON object keyed by metric family:

    {"nv_inference_count": {"help": "...", "type": "counter",
                            "samples": [{"labels": {"model": "m", "version": "1"},
                                         "value": 3.0}]}}

A sample whose name is not the family's (a summary's ``_sum``/``_count``, a
histogram's ``_bucket``) carries it as ``"name"``. Values that JSON has no
number for (+Inf, -Inf, NaN) are kept as those strings.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def prometheus_to_json(text: str) -> str:
    """The JSON form (a str) of Prometheus exposition text."""
    families: dict[str, dict[str, Any]] = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            words = line.split(None, 3)
            if len(words) >= 3 and words[1] in ("HELP", "TYPE"):
                current = _family(families, words[2])
                key = "help" if words[1] == "HELP" else "type"
                value = words[3] if len(words) > 3 else ""
                current[key] = _unescape(value) if key == "help" else value
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, labels, value = match.groups()
        family_name = name
        if current is not None and name.startswith(current["_name"]):
            family_name = current["_name"]
        sample: dict[str, Any] = {"labels": _labels(labels or ""), "value": _number(value)}
        if name != family_name:
            sample["name"] = name
        _family(families, family_name)["samples"].append(sample)
    for family in families.values():
        del family["_name"]
    return json.dumps(families)


def _family(families: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    if name not in families:
        families[name] = {"_name": name, "help": "", "type": "untyped", "samples": []}
    return families[name]


def _labels(text: str) -> dict[str, str]:
    return {key: _unescape(value) for key, value in _LABEL.findall(text)}


def _unescape(text: str) -> str:
    return re.sub(r'\\[\\"n]', lambda m: _UNESCAPE[m.group(0)], text)


def _number(text: str) -> Any:
    try:
        value = float(text)
    except ValueError:
        return text
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return value
