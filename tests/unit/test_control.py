"""Tests of tritonserver._control.instances and load_reasons on model folders
made here: which models load as one core instance with workers (and how the
configuration is rewritten and shown back), and the reason given when the
core only says a load failed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonserver import _gpu
from tritonserver._control import instances
from tritonserver._control.instances import WORKERS, load_parameters, user_view
from tritonserver._control.load_reasons import POLL_FAILURE, explain, failure_lines, with_reason
from tritonserver._control.model_folder import Repositories

SDK_MARKER = b"tritonserver-backend-sdk:workers-parameter-1"

CPU_MODEL = """
name: "m"
backend: "sdkbackend"
max_batch_size: 4
input [ { name: "IN", data_type: TYPE_FP32, dims: [ 2 ] } ]
output [ { name: "OUT", data_type: TYPE_FP32, dims: [ 2 ] } ]
instance_group [ { kind: KIND_CPU, count: 3 } ]
parameters { key: "kept" value { string_value: "yes" } }
"""


@pytest.fixture
def backends(tmp_path):
    """A backend folder: 'sdkbackend' built with the SDK (its library holds
    the SDK's marker), 'other' not, 'onnxruntime' built with it."""
    root = tmp_path / "backends"
    for name, data in (("sdkbackend", b"\0lib" + SDK_MARKER + b"\0"), ("other", b"\0plain\0"),
                       ("onnxruntime", SDK_MARKER)):
        (root / name).mkdir(parents=True)
        (root / name / f"libtriton_{name}.so").write_bytes(data)
    return root


@pytest.fixture(autouse=True)
def _workers_on(monkeypatch):
    monkeypatch.delenv("TRITONSERVER_ONE_CORE_INSTANCE", raising=False)


def params_for(model_dir, backends, name="m", parameters=None, **kwargs):
    model = Repositories([str(model_dir.parent)]).read(name, parameters)
    return load_parameters(model, [str(backends)], **kwargs)


def test_sdk_model_loads_as_one_instance_with_workers(model, backends):
    folder = model("m", CPU_MODEL)
    out = params_for(folder, backends)
    assert out is not None and set(out) == {"config"}
    config = json.loads(out["config"])
    assert config["name"] == "m"
    assert config["instance_group"] == [{"kind": "KIND_CPU", "count": 1}]
    assert config["parameters"] == {"kept": {"string_value": "yes"},
                                    WORKERS: {"string_value": "3"}}
    assert config["max_batch_size"] == 4 and config["input"][0]["name"] == "IN"
    # The user sees the count asked for, and no workers parameter.
    shown = user_view(config)
    assert shown["instance_group"] == [{"kind": "KIND_CPU", "count": 3}]
    assert shown["parameters"] == {"kept": {"string_value": "yes"}}
    assert config["parameters"][WORKERS] == {"string_value": "3"}  # not changed in place


def test_load_call_parameters_are_kept_and_override_config_is_read(model, backends):
    folder = model("m", CPU_MODEL)
    override = {"backend": "sdkbackend", "instance_group": [{"kind": "KIND_CPU", "count": 5}]}
    out = params_for(folder, backends, parameters={"config": json.dumps(override), "x": 1})
    assert out is not None and out["x"] == 1
    assert json.loads(out["config"])["parameters"][WORKERS] == {"string_value": "5"}


@pytest.mark.parametrize("change", [
    ("backend: \"sdkbackend\"", "backend: \"other\""),  # not built with the SDK
    ("backend: \"sdkbackend\"", "backend: \"missing\""),  # no such backend
    ("count: 3", "count: 1"),  # one instance asked for: nothing to change
    ("instance_group [ { kind: KIND_CPU, count: 3 } ]",
     "instance_group [ { kind: KIND_CPU, count: 2 }, { kind: KIND_CPU, count: 2 } ]"),
    ("kind: KIND_CPU, count: 3", "kind: KIND_GPU, count: 3"),
    ("count: 3", "count: 3, host_policy: \"numa0\""),
    ("count: 3", "count: 3, rate_limiter { priority: 2 }"),
    ("max_batch_size: 4", "max_batch_size: 4 sequence_batching { }"),
])
def test_models_that_keep_their_core_instances(model, backends, change):
    folder = model("m", CPU_MODEL.replace(*change))
    assert change[0] in CPU_MODEL
    assert params_for(folder, backends) is None


def test_unreadable_missing_or_switched_off(model, backends, repo, monkeypatch):
    assert params_for(repo / "nothing", backends) is None
    assert params_for(model("broken", "name: {"), backends, "broken") is None
    assert params_for(model("m", CPU_MODEL), backends,
                      parameters={"config": "not json"}) is None
    assert params_for(model("m", CPU_MODEL), backends,
                      parameters={"file:1/model.onnx": b"x"}) is None
    monkeypatch.setenv("TRITONSERVER_ONE_CORE_INSTANCE", "0")
    assert params_for(model("m", CPU_MODEL), backends) is None


def test_config_less_model_takes_its_backend_from_the_model_file(model, backends):
    folder = model("auto", None, files=("1/model.onnx",))
    assert params_for(folder, backends, "auto") is None  # strict: the core says why
    out = params_for(folder, backends, "auto", autocomplete=True)
    if _gpu.present():  # KIND_AUTO on a GPU machine keeps its instances
        assert out is None
        return
    config = json.loads(out["config"])
    assert config["parameters"][WORKERS] == {"string_value": "2"}  # onnxruntime's default
    assert config["name"] == "auto"
    # A python model is not on an SDK backend.
    assert params_for(model("py", None, files=("1/model.py",)), backends, "py",
                      autocomplete=True) is None


def test_is_ensemble(model, repo):
    model("ens", 'name: "ens"\nplatform: "ensemble"\n')
    model("m", CPU_MODEL)
    model("bad", "platform: [")
    repositories = Repositories([str(repo)])
    assert repositories.read("ens").ensemble
    assert not any(repositories.read(name).ensemble for name in ("m", "missing", "bad"))


@given(st.dictionaries(st.text(max_size=8), st.one_of(
    st.none(), st.integers(), st.text(max_size=5),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2)), max_size=4))
@settings(max_examples=200, deadline=None, database=None)
def test_user_view_never_fails_and_leaves_configs_without_workers(parameters):
    config = {"name": "m", "parameters": parameters,
              "instance_group": [{"kind": "KIND_CPU", "count": 1}]}
    shown = user_view(config)
    if WORKERS not in parameters:
        assert shown is config


def test_user_view_of_a_bad_workers_value_is_the_config_itself():
    config = {"parameters": {WORKERS: {"string_value": "many"}}}
    assert user_view(config) is config
    assert user_view({"parameters": "x"}) == {"parameters": "x"}


def test_marker_is_what_the_sdk_writes():
    """The SDK's marker text the library is searched for."""
    assert instances._MARKER == SDK_MARKER


# ---- load_reasons ----------------------------------------------------------------------


def reason(name, model_dirs, repositories=("r",), parameters=None, strict=True,
           namespacing=False):
    model = Repositories([str(d.parent) for d in model_dirs]).read(name, parameters)
    return explain(model, list(repositories), strict, namespacing)


def test_reasons_for_the_config_override():
    assert "must be a string" in reason("m", [], parameters={"config": {"a": 1}})
    assert "not valid JSON" in reason("m", [], parameters={"config": "{"})
    assert "must be a JSON object" in reason("m", [], parameters={"config": "[1]"})
    assert "log" in reason("m", [], parameters={"file:1/model.onnx": b""})


def test_reasons_from_the_repository(model, repo, tmp_path):
    text = reason("gone", [repo / "gone"], repositories=[str(repo)])
    assert "model not found" in text and str(repo) in text and "'gone'" in text
    assert "(no folder 'gone' in: none)" in reason("gone", [repo / "gone"], repositories=[])
    a = model("twice")
    b = tmp_path / "repo2" / "twice"
    b.mkdir(parents=True)
    assert "not unique" in reason("twice", [a, b])
    assert "not unique" not in reason("twice", [a, b], namespacing=True)
    bad = model("bad", 'name: "bad"\nmax_batch_size: [\n')
    text = reason("bad", [bad])
    assert text.startswith(f"{bad / 'config.pbtxt'} does not parse") and "line 2" in text
    (bad / "config.pbtxt").write_bytes(b"name: \"\xff\"\n")
    assert "is not UTF-8 text" in reason("bad", [bad])
    fine = model("fine", 'name: "fine"\nbackend: "x"\n')
    assert "log_error=True" in reason("fine", [fine])
    assert "log_error=True" in reason("fine", [fine], parameters={"config": "{}"})
    bare = model("bare")
    assert "strict_model_config=True" in reason("bare", [bare], strict=True)
    assert "version folder" in reason("bare", [bare], strict=False)


def test_with_reason_and_failure_lines():
    core = f"failed to load 'm', {POLL_FAILURE}"
    assert with_reason(core, "why") == f"{core}: why"
    assert with_reason(f"{core}: why", "why") == f"{core}: why"
    lines = failure_lines({"b": "bad thing;\n", "a": "  other  "})
    assert lines == "\n  'a': other\n  'b': bad thing"
    assert failure_lines({}) == ""


@given(st.dictionaries(st.text(min_size=1, max_size=6), st.text(max_size=12), max_size=5))
@settings(max_examples=200, deadline=None, database=None)
def test_failure_lines_one_line_per_model(failures):
    text = failure_lines(failures)
    assert text.count("\n  '") >= len(failures)
    for name in failures:
        assert f"'{name}': " in text

