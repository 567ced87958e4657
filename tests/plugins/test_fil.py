"""The FIL backend (plugins/fil, distribution tritonserver-fil) on a real
server: Triton FIL repositories of every model type, trained here on
scikit-learn data, predict as XGBoost, LightGBM and scikit-learn predict
themselves (FIL's tolerances: rtol 1e-3), with FIL's parameters, outputs and
refusals; the native engines and treeshap_output; and the plugin found as a
separate distribution."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within
from plugins.xgboost_legacy import legacy_binary

EXPLICIT = tritonserver.ModelControlMode.EXPLICIT

FEATURES = 8
ROWS = 200


def _plugin_installed() -> None:
    try:
        import tritonserver_fil  # noqa: F401
    except ImportError:
        pytest.fail("tritonserver-fil is not installed: pip install ./plugins/fil (the README's "
                    "test command installs it)")


@pytest.fixture(scope="module")
def libs():
    _plugin_installed()
    return (pytest.importorskip("xgboost"), pytest.importorskip("lightgbm"),
            pytest.importorskip("treelite"), pytest.importorskip("sklearn"))


def data(classes: Optional[int], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_classification, make_regression

    if classes is None:
        x, y = make_regression(ROWS, FEATURES, n_informative=5, noise=0.1, random_state=seed)
    else:
        x, y = make_classification(ROWS, FEATURES, n_informative=5, n_classes=classes,
                                   random_state=seed)
    return x.astype(np.float32), y


def config(model_type: Optional[str], out_dims: int, params: dict[str, str],
           shap: Optional[int] = None, extra: str = "") -> str:
    entries = dict(params)
    if model_type is not None:
        entries["model_type"] = model_type
    listed = ",\n  ".join(f'{{ key: "{k}" value: {{ string_value: "{v}" }} }}'
                          for k, v in entries.items())
    outputs = f'{{ name: "output__0" data_type: TYPE_FP32 dims: [ {out_dims} ] }}'
    if shap is not None:
        outputs += f', {{ name: "treeshap_output" data_type: TYPE_FP32 dims: [ {shap} ] }}'
    return f"""backend: "fil"
max_batch_size: 4096
input [{{ name: "input__0" data_type: TYPE_FP32 dims: [ {FEATURES} ] }}]
output [{outputs}]
instance_group [{{ kind: KIND_CPU count: 2 }}]
parameters [
  {listed}
]
dynamic_batching {{}}
{extra}"""


class Repo:
    """A model repository written model by model."""

    def __init__(self, root: str):
        self.root = root

    def add(self, name: str, text: str, files: dict[str, Any]) -> str:
        folder = os.path.join(self.root, name)
        os.makedirs(os.path.join(folder, "1"), exist_ok=True)
        with open(os.path.join(folder, "config.pbtxt"), "w", encoding="utf-8") as f:
            f.write(text)
        for filename, write in files.items():
            write(os.path.join(folder, "1", filename))
        return name


@pytest.fixture(scope="module")
def trained(libs, tmp_path_factory):
    """The models, trained once: name -> (library model, features)."""
    xgb, lgb, treelite, _ = libs
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    models: dict[str, Any] = {}
    x, y = data(2)
    models["xgb_binary"] = (xgb.train({"objective": "binary:logistic", "max_depth": 4},
                                      xgb.DMatrix(x, y), 20), x)
    x, y = data(3, seed=1)
    models["xgb_multi"] = (xgb.train({"objective": "multi:softprob", "num_class": 3,
                                      "max_depth": 4}, xgb.DMatrix(x, y), 10), x)
    x, y = data(None, seed=2)
    models["xgb_reg"] = (xgb.train({"objective": "reg:squarederror", "max_depth": 4},
                                   xgb.DMatrix(x, y), 20), x)
    x, y = data(2, seed=3)
    models["lgb_binary"] = (lgb.train({"objective": "binary", "num_leaves": 8, "verbose": -1},
                                      lgb.Dataset(x, y), 20), x)
    x, y = data(3, seed=4)
    models["lgb_multi"] = (lgb.train({"objective": "multiclass", "num_class": 3, "num_leaves": 8,
                                      "verbose": -1}, lgb.Dataset(x, y), 10), x)
    x, y = data(None, seed=5)
    models["lgb_reg"] = (lgb.train({"objective": "regression", "num_leaves": 8, "verbose": -1},
                                   lgb.Dataset(x, y), 20), x)
    x, y = data(3, seed=6)
    models["rf_multi"] = (RandomForestClassifier(10, max_depth=6, random_state=0).fit(x, y), x)
    x, y = data(2, seed=7)
    models["rf_binary"] = (RandomForestClassifier(10, max_depth=6, random_state=0).fit(x, y), x)
    x, y = data(None, seed=8)
    models["rf_reg"] = (RandomForestRegressor(10, max_depth=6, random_state=0).fit(x, y), x)
    return models


def saved(booster: Any) -> Any:
    """Writes an XGBoost or LightGBM booster to the path it is given."""
    return lambda path: booster.save_model(path)


def checkpoint(estimator: Any) -> Any:
    import treelite.sklearn

    return lambda path: treelite.sklearn.import_model(estimator).serialize(path)


@pytest.fixture(scope="module")
def server(tmp_path_factory, libs):
    root = str(tmp_path_factory.mktemp("fil_repo"))
    s = start_server(model_repository=root, model_control_mode=EXPLICIT)
    s.repo = Repo(root)  # type: ignore[attr-defined]
    yield s
    stop_within(s)


def serve(server: tritonserver.Server, name: str, text: str, files: dict[str, Any]) -> Any:
    server.repo.add(name, text, files)  # type: ignore[attr-defined]
    return server.load(name)


def infer(model: Any, x: np.ndarray, outputs: tuple[str, ...] = ("output__0",)) -> Any:
    response = next(model.infer(inputs={"input__0": x}))
    got = {n: np.from_dlpack(response.outputs[n]) for n in outputs}
    return got if len(outputs) > 1 else got[outputs[0]]


def refused(server: tritonserver.Server, name: str, text: str, files: dict[str, Any]) -> str:
    server.repo.add(name, text, files)  # type: ignore[attr-defined]
    with pytest.raises(tritonserver.TritonError) as caught:
        server.load(name)
    assert server.live()
    return str(caught.value)


CLASSIFIER = {"output_class": "true", "threshold": "0.5"}
REGRESSOR = {"output_class": "false"}
PROBA = {"output_class": "true", "threshold": "0.5", "predict_proba": "true"}


def close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


# ---- Every model type against its library's own predictions ---------------

@pytest.mark.parametrize("model_type, filename", [("xgboost_json", "xgboost.json"),
                                                   ("xgboost_ubj", "xgboost.ubj")])
def test_xgboost_binary_classifier(server, trained, libs, model_type, filename):
    xgb = libs[0]
    booster, x = trained["xgb_binary"]
    p = booster.predict(xgb.DMatrix(x))
    labels = serve(server, f"xb_{model_type}", config(model_type, 1, CLASSIFIER),
                   {filename: saved(booster)})
    got = infer(labels, x)
    assert got.dtype == np.float32 and got.shape == (ROWS,)  # dims [1]: squeezed as FIL does
    near = np.abs(p - 0.5) < 1e-4
    np.testing.assert_array_equal(got[~near], (p > 0.5).astype(np.float32)[~near])
    proba = serve(server, f"xbp_{model_type}", config(model_type, 2, PROBA),
                  {filename: saved(booster)})
    close(infer(proba, x), np.stack([1 - p, p], axis=1))
    raw = serve(server, f"xbr_{model_type}", config(model_type, 1, REGRESSOR),
                {filename: saved(booster)})
    close(infer(raw, x), p)


def test_xgboost_multiclass_and_regressor(server, trained, libs):
    xgb = libs[0]
    booster, x = trained["xgb_multi"]
    probs = booster.predict(xgb.DMatrix(x))
    model = serve(server, "xm_labels", config("xgboost_json", 1, CLASSIFIER),
                  {"xgboost.json": saved(booster)})
    np.testing.assert_array_equal(infer(model, x), np.argmax(probs, axis=1).astype(np.float32))
    model = serve(server, "xm_proba", config("xgboost_ubj", 3, PROBA),
                  {"xgboost.ubj": saved(booster)})
    close(infer(model, x), probs)
    booster, x = trained["xgb_reg"]
    model = serve(server, "xr", config("xgboost_json", 1, REGRESSOR),
                  {"xgboost.json": saved(booster)})
    close(infer(model, x), booster.predict(xgb.DMatrix(x)))


def test_lightgbm_models(server, trained):
    booster, x = trained["lgb_binary"]
    p = booster.predict(x)
    model = serve(server, "lb", config("lightgbm", 2, PROBA), {"model.txt": saved(booster)})
    close(infer(model, x), np.stack([1 - p, p], axis=1))
    model = serve(server, "lb_labels", config("lightgbm", 1, CLASSIFIER),
                  {"model.txt": saved(booster)})
    near = np.abs(p - 0.5) < 1e-4
    np.testing.assert_array_equal(infer(model, x)[~near], (p > 0.5)[~near].astype(np.float32))
    booster, x = trained["lgb_multi"]
    probs = booster.predict(x)
    model = serve(server, "lm", config("lightgbm", 3, PROBA), {"model.txt": saved(booster)})
    close(infer(model, x), probs)
    model = serve(server, "lm_labels", config("lightgbm", 1, CLASSIFIER),
                  {"model.txt": saved(booster)})
    np.testing.assert_array_equal(infer(model, x), np.argmax(probs, axis=1).astype(np.float32))
    booster, x = trained["lgb_reg"]
    model = serve(server, "lr", config("lightgbm", 1, REGRESSOR), {"model.txt": saved(booster)})
    close(infer(model, x), booster.predict(x))


def test_lightgbm_categorical_splits(server, libs):
    lgb = libs[1]
    rng = np.random.default_rng(9)
    x = rng.normal(size=(ROWS, FEATURES)).astype(np.float32)
    x[:, 0] = rng.integers(0, 6, ROWS)
    y = ((x[:, 0] % 2 == 0) ^ (x[:, 1] > 0)).astype(int)
    booster = lgb.train({"objective": "binary", "num_leaves": 8, "verbose": -1},
                        lgb.Dataset(x, y, categorical_feature=[0]), 20)
    assert "cat_threshold" in booster.model_to_string()
    p = booster.predict(x)
    for engine in ("gtil", "native"):
        model = serve(server, f"lcat_{engine}", config("lightgbm", 2, {**PROBA, "engine": engine}),
                      {"model.txt": saved(booster)})
        close(infer(model, x), np.stack([1 - p, p], axis=1))


def test_scikit_learn_forests_through_treelite_checkpoints(server, trained):
    forest, x = trained["rf_multi"]
    model = serve(server, "rfm", config("treelite_checkpoint", 3, PROBA),
                  {"checkpoint.tl": checkpoint(forest)})
    close(infer(model, x), forest.predict_proba(x).astype(np.float32))
    model = serve(server, "rfm_labels", config("treelite_checkpoint", 1, CLASSIFIER),
                  {"checkpoint.tl": checkpoint(forest)})
    np.testing.assert_array_equal(infer(model, x), forest.predict(x).astype(np.float32))
    forest, x = trained["rf_binary"]
    p = forest.predict_proba(x)[:, 1]
    model = serve(server, "rfb", config("treelite_checkpoint", 2, PROBA),
                  {"checkpoint.tl": checkpoint(forest)})
    close(infer(model, x), forest.predict_proba(x).astype(np.float32))
    model = serve(server, "rfb_labels", config("treelite_checkpoint", 1, CLASSIFIER),
                  {"checkpoint.tl": checkpoint(forest)})
    np.testing.assert_array_equal(infer(model, x), (p > 0.5).astype(np.float32))
    forest, x = trained["rf_reg"]
    model = serve(server, "rfr", config("treelite_checkpoint", 1, REGRESSOR),
                  {"checkpoint.tl": checkpoint(forest)})
    close(infer(model, x), forest.predict(x).astype(np.float32))


def legacy(booster: Any) -> Any:
    """Writes the booster in XGBoost's legacy binary format (xgboost_legacy.py)."""
    def write(path: str) -> None:
        with open(path, "wb") as f:
            f.write(legacy_binary(booster))
    return write


def test_xgboost_legacy_binary(server, trained, libs):
    xgb = libs[0]
    booster, x = trained["xgb_binary"]
    p = booster.predict(xgb.DMatrix(x))
    # No model_type: FIL's default is xgboost, read from xgboost.model.
    model = serve(server, "xlegacy", config(None, 2, PROBA), {"xgboost.model": legacy(booster)})
    close(infer(model, x), np.stack([1 - p, p], axis=1))
    model = serve(server, "xlegacy_labels", config("xgboost", 1, CLASSIFIER),
                  {"xgboost.model": legacy(booster)})
    near = np.abs(p - 0.5) < 1e-4
    np.testing.assert_array_equal(infer(model, x)[~near], (p > 0.5)[~near].astype(np.float32))
    booster, x = trained["xgb_multi"]
    model = serve(server, "xlegacy_multi", config("xgboost", 3, PROBA),
                  {"xgboost.model": legacy(booster)})
    close(infer(model, x), booster.predict(xgb.DMatrix(x)))
    booster, x = trained["xgb_reg"]
    model = serve(server, "xlegacy_reg", config("xgboost", 1, REGRESSOR),
                  {"xgboost.model": legacy(booster)})
    close(infer(model, x), booster.predict(xgb.DMatrix(x)))
    if tuple(int(v) for v in xgb.__version__.split(".")[:2]) >= (3, 1):
        text = refused(server, "xlegacy_native", config("xgboost", 1, {**REGRESSOR,
                                                                       "engine": "native"}),
                       {"xgboost.model": legacy(booster)})
        assert "engine native needs xgboost to read the model, and xgboost" in text
        assert "XGBoost 3.1 and later no longer read the legacy binary format" in text


# ---- FIL's parameters -------------------------------------------------------

def test_threshold_is_strict(server, trained, libs):
    treelite = libs[2]
    booster, x = trained["xgb_binary"]
    folder = server.repo.add("thr_probe", config("xgboost_json", 1, REGRESSOR),  # type: ignore
                             {"xgboost.json": saved(booster)})
    tl = treelite.frontend.load_xgboost_model(os.path.join(server.repo.root, folder, "1",
                                                           "xgboost.json"))
    p = treelite.gtil.predict(tl, x).reshape(-1).astype(np.float32)
    threshold = float(p[0])  # row 0 sits exactly on the threshold: not above it
    model = serve(server, "thr", config("xgboost_json", 1, {"output_class": "true",
                                                            "threshold": repr(threshold)}),
                  {"xgboost.json": saved(booster)})
    got = infer(model, x)
    assert got[0] == 0.0
    np.testing.assert_array_equal(got, (p > np.float32(threshold)).astype(np.float32))
    model = serve(server, "thr_low", config("xgboost_json", 1, {"output_class": "true",
                                                                "threshold": "0.01x"}),
                  {"xgboost.json": saved(booster)})  # read as C++ streams read: 0.01
    np.testing.assert_array_equal(infer(model, x), (p > np.float32(0.01)).astype(np.float32))


def test_is_classifier_and_every_accepted_parameter(server, trained, libs):
    xgb = libs[0]
    booster, x = trained["xgb_binary"]
    p = booster.predict(xgb.DMatrix(x))
    params = {"is_classifier": "true", "threshold": "0.5", "predict_proba": "true",
              "cpu_nthread": "1", "use_experimental_optimizations": "true",
              "algo": "TREE_REORG", "layout": "breadth_first", "storage_type": "SPARSE",
              "threads_per_tree": "2", "chunk_size": "4", "blocks_per_sm": "2",
              "transfer_threshold": "3", "xgboost_allow_unknown_field": "false"}
    model = serve(server, "allp", config("xgboost_json", 2, params),
                  {"xgboost.json": saved(booster)})
    close(infer(model, x), np.stack([1 - p, p], axis=1))


def test_default_model_filename_and_model_type_default(server, trained, libs):
    xgb = libs[0]
    booster, x = trained["xgb_reg"]
    model = serve(server, "named", config("xgboost_ubj", 1, REGRESSOR,
                                          extra='default_model_filename: "trees.ubj"\n'),
                  {"trees.ubj": saved(booster)})
    close(infer(model, x), booster.predict(xgb.DMatrix(x)))
    # No model_type: FIL reads xgboost (legacy binary) from xgboost.model.
    text = refused(server, "untyped", config(None, 1, REGRESSOR), {"xgboost.json":
                                                                   saved(booster)})
    assert "unable to find the XGBoost binary (legacy) model file" in text
    assert os.path.join("untyped", "1", "xgboost.model") in text


def test_xgboost_allow_unknown_field(server, trained, libs):
    xgb = libs[0]
    booster, x = trained["xgb_reg"]

    def with_unknown_field(path: str) -> None:
        doc = json.loads(booster.save_raw("json"))
        doc["learner"]["not_a_field"] = "1"
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f)

    text = refused(server, "unknown_strict", config("xgboost_json", 1, REGRESSOR),
                   {"xgboost.json": with_unknown_field})
    assert "Provided JSON could not be parsed as XGBoost model" in text  # Treelite's text
    model = serve(server, "unknown_ok", config("xgboost_json", 1, {
        **REGRESSOR, "xgboost_allow_unknown_field": "true"}), {"xgboost.json": with_unknown_field})
    close(infer(model, x), booster.predict(xgb.DMatrix(x)))


@pytest.mark.parametrize("params, text", [
    ({}, "Required parameter output_class not found in config"),
    ({"output_class": "true"}, "Required parameter threshold not found in config"),
    ({"output_class": "true", "threshold": "high"}, "Bad input for parameter threshold"),
    ({"output_class": "True"}, "Expected 'true' or 'false' for parameter 'output_class', got: "
                               "'True'"),
    ({"is_classifier": "yes"}, "Expected 'true' or 'false' for parameter 'is_classifier', got: "
                               "'yes'"),
    ({**REGRESSOR, "predict_proba": "1"}, "Expected 'true' or 'false' for parameter "
                                          "'predict_proba', got: '1'"),
    ({**REGRESSOR, "model_type": "catboost"}, "catboost not recognized as a valid serialization "
                                              "format."),
    ({**REGRESSOR, "use_experimental_optimizations": "on"},
     "Expected 'true' or 'false' for parameter 'use_experimental_optimizations', got: 'on'"),
    ({**REGRESSOR, "engine": "turbo"}, "parameter engine: 'turbo' is not one of gtil, native"),
])
def test_bad_parameters_are_refused_with_fils_texts(server, trained, params, text):
    booster, _ = trained["xgb_binary"]
    params = dict(params)
    model_type = params.pop("model_type", "xgboost_json")
    got = refused(server, f"bad_{abs(hash(text)) % 10**8}", config(model_type, 1, params),
                  {"xgboost.json": saved(booster)})
    assert text in got


def test_outputs_that_do_not_fit_the_model_are_refused(server, trained):
    booster, _ = trained["xgb_multi"]
    text = refused(server, "bad_dims", config("xgboost_json", 2, PROBA),
                   {"xgboost.json": saved(booster)})
    assert "output__0 holds 2 value(s) per row, but this model gives 3 (a 3-class classifier " \
           "with predict_proba): set its dims to [ 3 ]" in text
    text = refused(server, "bad_shap", config("xgboost_json", 3, PROBA, shap=5),
                   {"xgboost.json": saved(booster)})
    assert "treeshap_output holds 5 values per row; the model's SHAP values are 27" in text


# ---- treeshap_output and the native engines --------------------------------

def test_treeshap_output_from_the_libraries(server, trained, libs):
    xgb = libs[0]
    booster, x = trained["xgb_binary"]
    model = serve(server, "shap_xgb", config("xgboost_json", 2, PROBA, shap=FEATURES + 1),
                  {"xgboost.json": saved(booster)})
    got = infer(model, x, ("output__0", "treeshap_output"))
    close(got["treeshap_output"], booster.predict(xgb.DMatrix(x), pred_contribs=True))
    # Infinities (XGBoost refuses them) take the path of the largest finite value.
    edge = x[:4].copy()
    edge[0, :], edge[1, :] = np.inf, -np.inf
    edge[2, ::2] = np.inf
    finite = np.where(np.isposinf(edge), np.finfo(np.float32).max,
                      np.where(np.isneginf(edge), -np.finfo(np.float32).max, edge))
    close(infer(model, edge, ("treeshap_output",)),
          booster.predict(xgb.DMatrix(finite), pred_contribs=True))
    booster, x = trained["xgb_multi"]
    model = serve(server, "shap_xgb_multi", config("xgboost_json", 3, PROBA,
                                                   shap=3 * (FEATURES + 1)),
                  {"xgboost.json": saved(booster)})
    shap = infer(model, x, ("treeshap_output",))
    close(shap, booster.predict(xgb.DMatrix(x), pred_contribs=True).reshape(ROWS, -1))
    booster, x = trained["lgb_multi"]
    model = serve(server, "shap_lgb", config("lightgbm", 3, PROBA, shap=3 * (FEATURES + 1)),
                  {"model.txt": saved(booster)})
    close(infer(model, x, ("treeshap_output",)), booster.predict(x, pred_contrib=True))
    forest, _ = trained["rf_multi"]
    text = refused(server, "shap_rf", config("treelite_checkpoint", 3, PROBA,
                                             shap=3 * (FEATURES + 1)),
                   {"checkpoint.tl": checkpoint(forest)})
    assert "treeshap_output needs the model's own library" in text


@pytest.mark.parametrize("key, model_type, filename, out, params", [
    ("xgb_binary", "xgboost_json", "xgboost.json", 2, PROBA),
    ("xgb_multi", "xgboost_ubj", "xgboost.ubj", 3, PROBA),
    ("xgb_multi", "xgboost_json", "xgboost.json", 1, CLASSIFIER),
    ("xgb_reg", "xgboost_json", "xgboost.json", 1, REGRESSOR),
    ("lgb_binary", "lightgbm", "model.txt", 2, PROBA),
    ("lgb_multi", "lightgbm", "model.txt", 3, PROBA),
    ("lgb_reg", "lightgbm", "model.txt", 1, REGRESSOR),
])
def test_the_native_engine_answers_as_gtil(server, trained, key, model_type, filename, out,
                                           params):
    booster, x = trained[key]
    name = f"native_{key}_{model_type}_{out}"
    gtil = serve(server, f"g{name}", config(model_type, out, params), {filename:
                                                                       saved(booster)})
    native = serve(server, name, config(model_type, out, {**params, "engine": "native"}),
                   {filename: saved(booster)})
    close(infer(native, x), infer(gtil, x))
    forest, _ = trained["rf_reg"]
    text = refused(server, f"n{name}_rf", config("treelite_checkpoint", 1, {
        **REGRESSOR, "engine": "native"}), {"checkpoint.tl": checkpoint(forest)})
    assert "engine native needs the model's own library" in text


# ---- Serving -----------------------------------------------------------------

def test_a_model_without_batching(server, trained, libs):
    xgb = libs[0]
    booster, x = trained["xgb_binary"]
    p = booster.predict(xgb.DMatrix(x))
    text = config("xgboost_json", 2, PROBA).replace("max_batch_size: 4096", "max_batch_size: 0")
    text = text.replace(f"dims: [ {FEATURES} ]", f"dims: [ -1, {FEATURES} ]")
    text = text.replace("dims: [ 2 ]", "dims: [ -1, 2 ]").replace("dynamic_batching {}", "")
    model = serve(server, "unbatched", text, {"xgboost.json": saved(booster)})
    close(infer(model, x), np.stack([1 - p, p], axis=1))


def test_single_rows_are_batched_and_each_answered(server, trained, libs):
    xgb = libs[0]
    booster, x = trained["xgb_multi"]
    probs = booster.predict(xgb.DMatrix(x))
    model = serve(server, "batched", config("xgboost_json", 3, PROBA),
                  {"xgboost.json": saved(booster)})
    with ThreadPoolExecutor(8) as pool:
        rows = list(pool.map(lambda i: infer(model, x[i:i + 1]), range(ROWS)))
    close(np.concatenate(rows), probs)


def test_the_plugin_is_a_separate_distribution_found_by_entry_point():
    _plugin_installed()
    from importlib import metadata

    from tritonserver._framework import _plugins

    entry = _plugins.resolve("fil")
    assert entry is not None and entry.distribution == "tritonserver-fil"
    assert entry.value == "tritonserver_fil:FilBackend"
    assert metadata.distribution("tritonserver-fil").version == entry.version
    run = subprocess.run([sys.executable, "-m", "tritonserver", "backends", "--json"],
                         capture_output=True, text=True, timeout=120)
    rows = {r["backend"]: r for r in json.loads(run.stdout)}
    assert rows["fil"]["distribution"] == "tritonserver-fil" and rows["fil"]["loads"]
    assert rows["fil"]["api_version"] == "1.0"
    # Only the public plugin API: no underscore module of tritonserver.
    import tritonserver_fil

    folder = os.path.dirname(tritonserver_fil.__file__)
    for name in os.listdir(folder):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                source = f.read()
            assert "tritonserver._" not in source, name


def test_the_plugin_passes_mypy_strict():
    _plugin_installed()
    pytest.importorskip("mypy")
    run = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--no-incremental",
                          "-p", "tritonserver_fil"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_benchmark_runs(tmp_path):
    _plugin_installed()
    script = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "fil.py")
    out = tmp_path / "fil.json"
    run = subprocess.run([sys.executable, script, "--quick", "--json", str(out)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    doc = json.loads(out.read_text())
    assert set(doc["models"]) == {"xgboost", "lightgbm"}
    rows = doc["models"]["xgboost"]["rows_per_s"]
    assert set(rows) == {"gtil-direct", "native-direct", "server-gtil", "server-native"}
    assert all(rows[s]["1000"]["median"] > 0 for s in rows)
    assert "server-gtil / gtil-direct at 1,000 rows" in run.stdout
