"""FIL's model parameters, read by FIL's rules (RAPIDS-Triton's
get_config_param) with its texts.

- A boolean is exactly ``true`` or ``false``; anything else fails ("Expected
  'true' or 'false' for parameter ...").
- A number is read as C++ ``istream >>`` reads it: its longest leading number
  (``"0.3x"`` reads 0.3); none at all fails for a required parameter ("Bad
  input for parameter ...") and gives the default otherwise.
- A required parameter that is absent fails ("Required parameter ... not
  found in config").
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Optional

from tritonserver.backend_api import InternalError, InvalidArgumentError, UnsupportedError

log = logging.getLogger("tritonserver.fil")

# model_type -> (FIL's default file name, what it is)
FORMATS = {
    "xgboost": ("xgboost.model", "XGBoost binary (legacy)"),
    "xgboost_json": ("xgboost.json", "XGBoost JSON"),
    "xgboost_ubj": ("xgboost.ubj", "XGBoost UBJSON"),
    "lightgbm": ("model.txt", "LightGBM"),
    "treelite_checkpoint": ("checkpoint.tl", "Treelite checkpoint"),
}
ENGINES = ("gtil", "native")
# Parameters of FIL on a GPU: read as FIL reads them, then ignored on CPU.
GPU_ONLY = ("algo", "layout", "storage_type", "threads_per_tree", "chunk_size",
            "blocks_per_sm", "transfer_threshold")

_FLOAT = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_INT = re.compile(r"\s*[+-]?\d+")


@dataclass(frozen=True)
class FilParams:
    model_type: str
    is_classifier: bool
    threshold: float
    predict_proba: bool
    xgboost_allow_unknown_field: bool
    cpu_nthread: int
    engine: str


def _boolean(parameters: dict[str, str], key: str, default: Optional[bool]) -> bool:
    if key not in parameters:
        if default is None:
            raise InvalidArgumentError(f"Required parameter {key} not found in config")
        return default
    text = parameters[key]
    if text == "true":
        return True
    if text == "false":
        return False
    raise InternalError(f"Expected 'true' or 'false' for parameter '{key}', got: '{text}'")


def _number(parameters: dict[str, str], key: str, pattern: re.Pattern[str],
            default: Optional[float]) -> float:
    if key not in parameters:
        if default is None:
            raise InvalidArgumentError(f"Required parameter {key} not found in config")
        return default
    match = pattern.match(parameters[key])
    if match is None:
        if default is None:
            raise InvalidArgumentError(f"Bad input for parameter {key}")
        return default
    return float(match.group(0)) if pattern is _FLOAT else int(match.group(0))


def read(parameters: dict[str, str]) -> FilParams:
    """The parameters of one model, as FIL reads them, in FIL's order."""
    # FIL 25.09 renamed output_class to is_classifier (and warns about the old
    # name); both are read, output_class first when it says true or false.
    legacy = parameters.get("output_class")
    predict_proba = _boolean(parameters, "predict_proba", False)
    model_type = parameters.get("model_type", "xgboost")
    model_type = model_type.split()[0] if model_type.split() else "xgboost"
    if model_type not in FORMATS:
        raise UnsupportedError(f"{model_type} not recognized as a valid serialization format.")
    allow_unknown = _boolean(parameters, "xgboost_allow_unknown_field", False)
    _number(parameters, "transfer_threshold", _INT, 0)
    if legacy in ("true", "false"):
        is_classifier = legacy == "true"
    elif "is_classifier" in parameters or legacy is None:
        name = "is_classifier" if "is_classifier" in parameters else "output_class"
        is_classifier = _boolean(parameters, name, None)
    else:  # output_class present but neither true nor false
        is_classifier = _boolean(parameters, "output_class", None)
    threshold = float(_number(parameters, "threshold", _FLOAT, None)) if is_classifier else 0.5
    for key in ("chunk_size", "threads_per_tree", "blocks_per_sm"):
        _number(parameters, key, _INT, 0)
    cpu_nthread = int(_number(parameters, "cpu_nthread", _INT, -1))
    _boolean(parameters, "use_experimental_optimizations", False)
    engine = parameters.get("engine", "gtil").strip() or "gtil"
    if engine not in ENGINES:
        raise InvalidArgumentError(
            f"parameter engine: '{engine}' is not one of {', '.join(ENGINES)} (gtil: Treelite's "
            "GTIL, FIL's CPU reference; native: the model's own library, checked against GTIL "
            "when the model loads)")
    ignored = [key for key in GPU_ONLY if parameters.get(key, "").strip()]
    if ignored:
        log.info("FIL parameters %s apply to GPU execution only; ignored on CPU",
                 ", ".join(ignored))
    return FilParams(model_type, is_classifier, threshold, predict_proba, allow_unknown,
                     cpu_nthread, engine)
