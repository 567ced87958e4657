"""A forest as FIL serves it on CPU: read by Treelite, predicted by GTIL
(Treelite's reference, what FIL's CPU path runs) or by the model's own
library, and turned into FIL's outputs.

FIL's rules, applied here:
- multi-class probabilities (predict_proba) of XGBoost and LightGBM models
  (one tree per class) are a softmax of the margins, whatever the model's
  objective said; forests whose leaves hold class distributions
  (scikit-learn) keep them as they are;
- a classifier without predict_proba gives a class: the first class of
  greatest score (multi-class), or 1.0 when the score is strictly greater
  than `threshold` (binary);
- a binary classifier with predict_proba and two output values per row
  gives [1 - p, p].
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, Callable, Optional

import numpy as np

from tritonserver.backend_api import (
    InternalError,
    InvalidArgumentError,
    UnavailableError,
    UnsupportedError,
)

from tritonserver_fil._params import FilParams

log = logging.getLogger("tritonserver.fil")

# Treelite 4.8 needs Python 3.11; 4.7.2, the same API, serves 3.9 and 3.10.
TREELITE = "treelite>=4.7.2,<5"
OLDEST = (4, 7, 2)


def _library(module: str, why: str, requirement: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise UnavailableError(
            f"the fil backend needs the {module} package {why} ({e}); install it with "
            f"pip install \"{requirement}\"") from None


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:3] if p.isdigit())


def treelite() -> Any:
    tl = _library("treelite", "to read and predict tree models", TREELITE)
    if _version(tl.__version__) < OLDEST:
        raise UnavailableError(f"the fil backend needs {TREELITE}; treelite {tl.__version__} "
                               f"is installed: pip install \"{TREELITE}\"")
    return tl


def load_treelite(path: str, params: FilParams) -> Any:
    """The model read by Treelite (FIL's loaders)."""
    tl = treelite()
    kind = params.model_type
    try:
        if kind == "xgboost":
            return tl.frontend.load_xgboost_model_legacy_binary(path)
        if kind in ("xgboost_json", "xgboost_ubj"):
            return tl.frontend.load_xgboost_model(
                path, format_choice="json" if kind == "xgboost_json" else "ubjson",
                allow_unknown_field=params.xgboost_allow_unknown_field)
        if kind == "lightgbm":
            return tl.frontend.load_lightgbm_model(path)
        return tl.Model.deserialize(path)
    except tl.TreeliteError as e:
        raise InternalError(str(e).strip()) from None


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)  # type: ignore[no-any-return]


def _postprocessor(name: str, header: Any) -> Optional[Callable[[np.ndarray], np.ndarray]]:
    """Treelite's postprocessor `name` on margins (n, classes), or None."""
    alpha = float(header.get_field("sigmoid_alpha")[0])
    ratio_c = float(header.get_field("ratio_c")[0])

    def sigmoid(x: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-alpha * x))

    table: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "identity": lambda x: x,
        "identity_multiclass": lambda x: x,
        "sigmoid": sigmoid,
        "multiclass_ova": sigmoid,
        "softmax": _softmax,
        "exponential": np.exp,
        "exponential_standard_ratio": lambda x: np.exp2(-x / ratio_c),
        "logarithm_one_plus_exp": lambda x: np.log1p(np.exp(x)),
        "signed_square": lambda x: np.sign(x) * x * x,
        "hinge": lambda x: (x > 0).astype(x.dtype),
    }
    return table.get(name)


class Forest:
    """One loaded model: `scores(x)` are GTIL's outputs (n, classes) with
    FIL's postprocessor, `outputs(x)` FIL's output__0, `shap(x)` the
    treeshap_output."""

    def __init__(self, path: str, params: FilParams, output_values: int, shap: bool):
        self.params = params
        self.path = path
        model = load_treelite(path, params)
        header = model.get_header_accessor()
        num_target = int(header.get_field("num_target")[0])
        if num_target != 1:
            raise UnsupportedError("Multi-target model not supported")
        self.num_class = int(header.get_field("num_class")[0])
        self.num_feature = int(model.num_feature)
        task = int(header.get_field("task_type")[0])
        leaf_classes = int(header.get_field("leaf_vector_shape")[1])
        multi_class = task == 2  # treelite::TaskType::kMultiClf
        if params.predict_proba and multi_class:
            # FIL: one tree per class gives a softmax; leaves holding class
            # distributions give them as they are.
            header.set_field("postprocessor", "softmax" if leaf_classes == 1
                             else "identity_multiclass")
        self.postprocessor = str(header.get_field("postprocessor"))
        self.model = model
        self._tl = treelite()
        self.output_values = output_values
        self._check_output(output_values)
        self._native: Optional[Callable[[np.ndarray, bool], np.ndarray]] = None
        self._native_booster: Any = None
        if params.engine == "native" or shap:
            self._native_booster = self._load_native(shap and params.engine != "native")
        if params.engine == "native":
            self._native = self._native_scores(header)
            self._check_native()
        self._shap = shap

    # ---- Outputs ---------------------------------------------------------

    def _check_output(self, values: int) -> None:
        """output__0's values per row must be what FIL writes for this model."""
        p = self.params
        if p.is_classifier and not p.predict_proba:
            wanted = [1]
        elif p.predict_proba and p.is_classifier and self.num_class == 1:
            wanted = [1, 2]
        else:
            wanted = [self.num_class]
        if values not in wanted:
            raise InvalidArgumentError(
                f"output__0 holds {values} value(s) per row, but this model gives "
                f"{' or '.join(map(str, wanted))} ({self._what()}): set its dims to "
                f"[ {wanted[-1]} ]")

    def _what(self) -> str:
        p = self.params
        kind = ("binary classifier" if self.num_class == 1 else
                f"{self.num_class}-class classifier") if p.is_classifier else (
            "regressor" if self.num_class == 1 else f"model of {self.num_class} outputs")
        return f"a {kind}" + (" with predict_proba" if p.predict_proba else "")

    def scores(self, x: np.ndarray) -> np.ndarray:
        """The model's outputs (n, classes), by the chosen engine."""
        if self._native is not None:
            return self._native(x, False)
        return self._gtil(x)

    def _gtil(self, x: np.ndarray) -> np.ndarray:
        try:
            result = self._tl.gtil.predict(self.model, x, nthread=self.params.cpu_nthread)
        except self._tl.TreeliteError as e:
            raise InternalError(str(e).strip()) from None
        return np.asarray(result, dtype=np.float32).reshape(x.shape[0], -1)

    def outputs(self, x: np.ndarray) -> np.ndarray:
        """output__0 for the rows `x` (n, features): (n, values)."""
        p = self.params
        scores = self.scores(x)
        if p.is_classifier and not p.predict_proba:
            if self.num_class > 1:
                return _first_max(scores)
            return (scores > np.float32(p.threshold)).astype(np.float32)
        if p.predict_proba and p.is_classifier and self.num_class == 1 and \
                self.output_values == 2:
            return np.concatenate([1.0 - scores, scores], axis=1).astype(np.float32, copy=False)
        return scores

    # ---- Native libraries --------------------------------------------------

    def _load_native(self, for_shap: bool) -> Any:
        kind = self.params.model_type
        why = "for treeshap_output" if for_shap else "for engine native"
        if kind.startswith("xgboost"):
            xgb = _library("xgboost", why, "xgboost")
            if kind == "xgboost" and _version(xgb.__version__) >= (3, 1):
                raise UnsupportedError(
                    f"{why.replace('for ', '')} needs xgboost to read the model, and xgboost "
                    f"{xgb.__version__} cannot: XGBoost 3.1 and later no longer read the legacy "
                    "binary format (model_type xgboost); use engine gtil, or save the model as "
                    "xgboost_json or xgboost_ubj")
            try:
                booster = xgb.Booster(model_file=self.path)
            except Exception as e:  # XGBoostError, or a decoding error on foreign bytes
                raise UnsupportedError(
                    f"xgboost {xgb.__version__} could not read {self.path} {why}: "
                    f"{type(e).__name__}: {str(e).strip().splitlines()[0]}") from None
            if self.params.cpu_nthread > 0:
                booster.set_param({"nthread": self.params.cpu_nthread})
            return booster
        if kind == "lightgbm":
            lgb = _library("lightgbm", why, "lightgbm")
            return lgb.Booster(model_file=self.path)
        if for_shap:
            raise UnsupportedError(
                "treeshap_output needs the model's own library (XGBoost's pred_contribs, "
                "LightGBM's pred_contrib), and a treelite_checkpoint has none (Treelite "
                "computes no SHAP values): serve the xgboost or lightgbm model, or remove "
                "treeshap_output")
        raise UnsupportedError(
            "engine native needs the model's own library (xgboost, lightgbm); a "
            "treelite_checkpoint has none: use engine gtil")

    def _native_scores(self, header: Any) -> Callable[[np.ndarray, bool], np.ndarray]:
        post = _postprocessor(self.postprocessor, header)
        if post is None:
            raise UnsupportedError(
                f"engine native: the model's postprocessor '{self.postprocessor}' is not one "
                "this backend applies to native margins; use engine gtil")
        booster = self._native_booster
        nthread = self.params.cpu_nthread
        if self.params.model_type.startswith("xgboost"):
            def margins(x: np.ndarray) -> np.ndarray:
                return np.asarray(booster.inplace_predict(_finite(x), predict_type="margin"))
        else:
            def margins(x: np.ndarray) -> np.ndarray:
                kwargs = {"num_threads": nthread} if nthread > 0 else {}
                return np.asarray(booster.predict(x, raw_score=True, **kwargs))

        def scores(x: np.ndarray, raw: bool) -> np.ndarray:
            m = margins(x).reshape(x.shape[0], -1).astype(np.float32, copy=False)
            return m if raw else post(m).astype(np.float32, copy=False)

        return scores

    def _check_native(self) -> None:
        """The native engine must agree with GTIL: a random batch, FIL's tolerances."""
        assert self._native is not None
        rng = np.random.default_rng(0)
        x = rng.normal(0.0, 2.0, size=(64, self.num_feature)).astype(np.float32)
        x[:8] = 0.0
        x[8:16] = rng.uniform(-100, 100, size=(8, self.num_feature))
        native, gtil = self._native(x, False), self._gtil(x)
        if native.shape != gtil.shape or not np.allclose(native, gtil, rtol=1e-3, atol=1e-3):
            worst = float(np.max(np.abs(native - gtil))) if native.shape == gtil.shape else None
            raise InternalError(
                f"engine native disagrees with GTIL on a random batch of 64 rows (shapes "
                f"{native.shape} and {gtil.shape}, largest difference {worst}): use engine gtil")

    def shap(self, x: np.ndarray) -> np.ndarray:
        """SHAP values of the margin per feature and a bias column:
        (n, features + 1), or (n, classes, features + 1), from the model's
        own library (XGBoost pred_contribs, LightGBM pred_contrib)."""
        booster = self._native_booster
        if self.params.model_type.startswith("xgboost"):
            import xgboost as xgb

            values = booster.predict(xgb.DMatrix(_finite(x)), pred_contribs=True)
        else:
            kwargs = {"num_threads": self.params.cpu_nthread} if self.params.cpu_nthread > 0 \
                else {}
            values = booster.predict(x, pred_contrib=True, **kwargs)
        return np.asarray(values, dtype=np.float32).reshape(x.shape[0], -1)


def _finite(x: np.ndarray) -> np.ndarray:
    """`x` with +-inf as the largest finite float32 of its sign: XGBoost
    refuses infinities (unless they mean missing), and a tree sends both the
    same way (every split of a forest has a finite threshold); NaN stays
    missing."""
    if np.isinf(x).any():
        top = np.finfo(np.float32).max
        return np.where(np.isposinf(x), top, np.where(np.isneginf(x), -top, x)).astype(np.float32)
    return x


def _first_max(scores: np.ndarray) -> np.ndarray:
    """FIL's class choice: the first class whose score is greatest, starting
    from class 0 at score 0 (a row of scores all <= 0 gives class 0)."""
    best: np.ndarray = np.argmax(scores, axis=1)
    best[scores.max(axis=1) <= 0] = 0
    return np.asarray(best, dtype=np.float32).reshape(-1, 1)
