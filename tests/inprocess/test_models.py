"""Python models run in-process (tritonserver.PythonModel, the inprocess
backend): registration, inputs and outputs, hooks, model folders."""

from __future__ import annotations

import gc
import os
import textwrap

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stats_when, stop_within

FP32_VECTOR = (np.float32, [-1])


class Adder(tritonserver.PythonModel):
    def execute(self, requests):
        return [{"SUM": r.inputs["A"] + r.inputs["B"]} for r in requests]


class Counted(tritonserver.PythonModel):
    calls: dict = {}

    def _count(self, hook):
        Counted.calls[hook] = Counted.calls.get(hook, 0) + 1

    def initialize(self):
        self._count("initialize")

    def finalize(self):
        self._count("finalize")

    def initialize_instance(self, instance):
        self._count("initialize_instance")

    def finalize_instance(self, instance):
        self._count("finalize_instance")

    def execute(self, requests):
        self._count("execute")
        return [{"Y": r.inputs["X"]} for r in requests]


def infer1(model, **inputs):
    return next(model.infer(inputs=inputs))


def test_register_before_start_in_default_mode():
    server = tritonserver.Server(log_error=True)  # no repository: the registered model's
    server.register_model("adder", Adder, inputs={"A": FP32_VECTOR, "B": FP32_VECTOR},
                          outputs={"SUM": FP32_VECTOR})
    server.start(wait_until_ready=True, timeout=60)
    try:
        a, b = np.arange(5, dtype=np.float32), np.full(5, 0.5, np.float32)
        out = infer1(server.model("adder"), A=a, B=b)
        np.testing.assert_array_equal(np.from_dlpack(out.outputs["SUM"]), a + b)
        assert ("adder", 1) in server.models()
        assert server.model("adder").config()["backend"] == "inprocess"
        with pytest.raises(tritonserver.UnsupportedError, match="EXPLICIT"):
            server.register_model("late", Adder, inputs={"A": FP32_VECTOR, "B": FP32_VECTOR},
                                  outputs={"SUM": FP32_VECTOR})
    finally:
        stop_within(server)


def test_register_on_running_explicit_server_and_reload(explicit_empty):
    specs = dict(inputs={"A": FP32_VECTOR, "B": FP32_VECTOR}, outputs={"SUM": FP32_VECTOR})
    model = explicit_empty.register_model("adder_live", Adder, **specs)
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(np.from_dlpack(infer1(model, A=x, B=x).outputs["SUM"]), 2 * x)

    class Subtracter(tritonserver.PythonModel):
        def execute(self, requests):
            return [{"SUM": r.inputs["A"] - r.inputs["B"]} for r in requests]

    explicit_empty.register_model("adder_live", Subtracter, **specs)  # replaces it
    np.testing.assert_array_equal(np.from_dlpack(infer1(model, A=x, B=x).outputs["SUM"]), 0 * x)
    explicit_empty.unload("adder_live", wait_until_unloaded=True, timeout=30)
    assert not model.ready()


def test_hook_call_counts(explicit_empty):
    Counted.calls = {}
    model = explicit_empty.register_model("counted", Counted, inputs={"X": FP32_VECTOR},
                                    outputs={"Y": FP32_VECTOR}, instance_count=2)
    assert Counted.calls == {"initialize": 1, "initialize_instance": 2}
    for _ in range(3):
        infer1(model, X=np.ones(2, np.float32))
    explicit_empty.unload("counted", wait_until_unloaded=True, timeout=30)
    assert Counted.calls == {"initialize": 1, "initialize_instance": 2, "execute": 3,
                             "finalize_instance": 2, "finalize": 1}


def test_model_attributes_and_instances(explicit_empty):
    seen = {}

    class Introspect(tritonserver.PythonModel):
        def initialize(self):
            seen["model"] = (self.name, self.version, self.parameters["scale"],
                             self.config["max_batch_size"])

        def initialize_instance(self, instance):
            seen.setdefault("instances", []).append((instance.name, instance.kind))

        def execute(self, requests):
            return [{"Y": r.inputs["X"] * float(self.parameters["scale"])} for r in requests]

    model = explicit_empty.register_model("introspect", Introspect, inputs={"X": FP32_VECTOR},
                                    outputs={"Y": FP32_VECTOR}, parameters={"scale": "3"})
    assert seen["model"] == ("introspect", 1, "3", 0)
    assert seen["instances"] == [("introspect_0_0", "CPU")]
    out = infer1(model, X=np.array([1, 2], np.float32))
    np.testing.assert_array_equal(np.from_dlpack(out.outputs["Y"]), [3, 6])


def test_request_fields_and_response_parameters(explicit_empty):
    class Echo(tritonserver.PythonModel):
        def execute(self, requests):
            out = []
            for r in requests:
                params = dict(r.parameters, id=r.id, flags=r.flags,
                              requested=",".join(r.requested_outputs))
                out.append(tritonserver.ModelResponse({"Y": r.inputs["X"]}, parameters=params))
            return out

    model = explicit_empty.register_model("echo_fields", Echo, inputs={"X": FP32_VECTOR},
                                    outputs={"Y": FP32_VECTOR})
    response = next(model.infer(inputs={"X": np.ones(1, np.float32)}, request_id="r-1",
                                parameters={"s": "text", "i": 7, "b": True, "d": 0.5}))
    assert response.parameters == {"s": "text", "i": 7, "b": True, "d": 0.5, "id": "r-1",
                                   "flags": 0, "requested": "Y"}


def test_bytes_inputs_and_outputs(explicit_empty):
    class Upper(tritonserver.PythonModel):
        def execute(self, requests):
            return [{"OUT": np.array([s.upper() for s in r.inputs["IN"].reshape(-1)],
                                     dtype=object).reshape(r.inputs["IN"].shape)}
                    for r in requests]

    model = explicit_empty.register_model("upper", Upper, inputs={"IN": (bytes, [-1])},
                                    outputs={"OUT": ("STRING", [-1])})
    out = infer1(model, IN=np.array([b"ab", b"", "h\xe9".encode()], dtype=object))
    assert out.outputs["OUT"].to_bytes_array().tolist() == [b"AB", b"", "h\xe9".encode().upper()]


def test_outputs_are_converted_or_refused(explicit_empty):
    class Loose(tritonserver.PythonModel):
        def execute(self, requests):
            out = []
            for r in requests:
                kind = int(r.inputs["K"][0])
                if kind == 0:
                    out.append({"Y": [1.5, 2.5]})                   # a list: FP32
                elif kind == 1:
                    out.append({"Y": np.array([1.5, 2.5])})         # float64: cast
                elif kind == 2:
                    out.append({"Y": np.array(["x"], dtype=object)})  # text: refused
                elif kind == 3:
                    out.append({"NOPE": np.zeros(1, np.float32)})   # unknown output
                else:
                    out.append({"Y": np.arange(6, dtype=np.float32)[::2]})  # strided
            return out

    model = explicit_empty.register_model("loose", Loose, inputs={"K": (np.int32, [1])},
                                    outputs={"Y": FP32_VECTOR})
    for kind in (0, 1):
        y = np.from_dlpack(infer1(model, K=np.array([kind], np.int32)).outputs["Y"])
        assert y.dtype == np.float32 and y.tolist() == [1.5, 2.5]
    with pytest.raises(tritonserver.InvalidArgumentError, match="not text"):
        infer1(model, K=np.array([2], np.int32))
    with pytest.raises(tritonserver.InvalidArgumentError, match="no output 'NOPE'"):
        infer1(model, K=np.array([3], np.int32))
    # a strided (non-contiguous) array is made contiguous
    y = np.from_dlpack(infer1(model, K=np.array([4], np.int32)).outputs["Y"])
    assert y.tolist() == [0, 2, 4]
    assert explicit_empty.live()


def test_inputs_are_read_only_views_and_a_kept_array_stays_valid(explicit_empty):
    kept = []

    class Keeper(tritonserver.PythonModel):
        def execute(self, requests):
            for r in requests:
                x = r.inputs["X"]
                assert not x.flags.writeable
                kept.append(x)  # kept past execute: holds its request
            return [{"Y": r.inputs["X"]} for r in requests]

    model = explicit_empty.register_model("keeper", Keeper, inputs={"X": FP32_VECTOR},
                                    outputs={"Y": FP32_VECTOR})
    values = np.random.default_rng(0).random(1 << 18, dtype=np.float32)  # 1 MiB
    infer1(model, X=values.copy())  # the client's array is garbage after this
    gc.collect()
    np.testing.assert_array_equal(kept[0], values)  # still the request's data
    assert np.sum(kept[0]) == pytest.approx(float(np.sum(values)), rel=1e-4)
    kept.clear()
    gc.collect()
    explicit_empty.unload("keeper", wait_until_unloaded=True, timeout=30)  # nothing held now


def test_statistics_count_inferences(explicit_empty):
    model = explicit_empty.register_model("stats_model", Adder,
                                    inputs={"A": FP32_VECTOR, "B": FP32_VECTOR},
                                    outputs={"SUM": FP32_VECTOR})
    x = np.ones(2, np.float32)
    for _ in range(4):
        infer1(model, A=x, B=x)
    stats = stats_when(model, lambda s: s["inference_stats"]["success"]["count"] >= 4)
    assert stats["inference_stats"]["success"]["count"] == 4
    assert stats["inference_stats"]["compute_infer"]["ns"] > 0
    assert 'nv_inference_count{model="stats_model",version="1"} 4' in explicit_empty.metrics()


def test_model_folder_with_a_python_model(tmp_path):
    folder = tmp_path / "repo" / "doubler"
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(textwrap.dedent("""
        backend: "inprocess"
        max_batch_size: 4
        dynamic_batching { }
        input [ { name: "X", data_type: TYPE_INT64, dims: [ 2 ] } ]
        output [ { name: "Y", data_type: TYPE_INT64, dims: [ 2 ] } ]
    """))
    (folder / "1" / "helper.py").write_text("FACTOR = 2\n")
    (folder / "1" / "model.py").write_text(textwrap.dedent("""
        import tritonserver
        from helper import FACTOR

        class Doubler(tritonserver.PythonModel):
            def execute(self, requests):
                return [{"Y": r.inputs["X"] * FACTOR} for r in requests]
    """))
    server = start_server(model_repository=str(tmp_path / "repo"))
    try:
        x = np.array([[1, 2], [3, 4]], np.int64)
        out = infer1(server.model("doubler"), X=x)
        np.testing.assert_array_equal(np.from_dlpack(out.outputs["Y"]), 2 * x)
    finally:
        stop_within(server)


def test_model_named_by_import_path(explicit_empty, tmp_path, monkeypatch):
    (tmp_path / "my_models_pkg.py").write_text(textwrap.dedent("""
        import tritonserver

        class Negate(tritonserver.PythonModel):
            def execute(self, requests):
                return [{"Y": -r.inputs["X"]} for r in requests]
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    repo = tmp_path / "repo"
    (repo / "negate" / "1").mkdir(parents=True)
    (repo / "negate" / "config.pbtxt").write_text(textwrap.dedent("""
        backend: "inprocess"
        input [ { name: "X", data_type: TYPE_FP32, dims: [ -1 ] } ]
        output [ { name: "Y", data_type: TYPE_FP32, dims: [ -1 ] } ]
        parameters { key: "python_model" value { string_value: "my_models_pkg:Negate" } }
    """))
    explicit_empty.register_model_repository(str(repo))
    try:
        model = explicit_empty.load("negate")
        out = infer1(model, X=np.array([1, -2], np.float32))
        np.testing.assert_array_equal(np.from_dlpack(out.outputs["Y"]), [-1, 2])
        explicit_empty.unload("negate", wait_until_unloaded=True, timeout=30)
    finally:
        explicit_empty.unregister_model_repository(str(repo))


@pytest.mark.parametrize("bad, match", [
    (dict(inputs={"X": (np.float32, [-1])}), "outputs"),
    (dict(inputs={"X": ("NOTATYPE", [1])}, outputs={}), "unknown data type"),
    (dict(inputs={"X": (np.float32, ["a"])}, outputs={}), "dims"),
    (dict(inputs={}, outputs={}, max_batch_size=-1), "max_batch_size"),
    (dict(inputs={}, outputs={}, dynamic_batching=True), "max_batch_size > 0"),
    (dict(inputs={}, outputs={}, instance_count=0), "instance_count"),
    (dict(inputs={}, outputs={}, colour="red"), "colour"),
])
def test_bad_registration_arguments(explicit_empty, bad, match):
    with pytest.raises(tritonserver.InvalidArgumentError, match=match):
        explicit_empty.register_model("bad_args", Adder, **bad)
    assert explicit_empty.live()


def test_register_refuses_what_is_not_a_python_model(explicit_empty):
    with pytest.raises(tritonserver.InvalidArgumentError, match="PythonModel"):
        explicit_empty.register_model("nope", object, inputs={}, outputs={})

    class NoExecute(tritonserver.PythonModel):
        pass

    with pytest.raises(tritonserver.InvalidArgumentError, match="execute"):
        explicit_empty.register_model("nope", NoExecute, inputs={}, outputs={})
    with pytest.raises(tritonserver.InvalidArgumentError, match="name"):
        explicit_empty.register_model("a/b", Adder, inputs={}, outputs={})


def test_exports():
    for name in ("PythonModel", "ModelRequest", "ModelResponse", "ResponseSender",
                 "ModelInstance"):
        assert name in tritonserver.__all__ and hasattr(tritonserver, name)
    assert os.path.isfile(os.path.join(os.path.dirname(tritonserver.__file__), "_inprocess",
                                       "pb_utils.py"))
