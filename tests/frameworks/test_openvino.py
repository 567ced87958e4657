"""What the openvino backend alone does (python/tritonserver/_openvino), as
Triton's does: model.xml (or default_model_filename, an ONNX file read by
OpenVINO), auto-complete from the model's layouts (strict_model_config=False),
the data types it refuses or converts, Triton's texts for configurations
that disagree with the model, its parameters and their texts, CPU only; a
batching model run at exactly max_batch_size rows (smaller batches padded
with ENABLE_BATCH_PADDING=yes, refused otherwise). Shared with the other
frameworks: test_loading.py, test_execution.py."""

from __future__ import annotations

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within
from frameworks.conftest import identity_config, openvino_answers

pytest.importorskip("onnx")
pytest.importorskip("openvino")

from frameworks import models_openvino as models  # noqa: E402

EXPLICIT = tritonserver.ModelControlMode.EXPLICIT
ADD_SUB = """
backend: "openvino"
max_batch_size: 0
input [ { name: "A" data_type: TYPE_FP32 dims: [ -1, 4 ] },
        { name: "B" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ -1, 4 ] },
         { name: "DIFF" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
"""


def add_sub_works(model: tritonserver.Model, rows: int = 2) -> None:
    a = np.arange(4 * rows, dtype=np.float32).reshape(rows, 4)
    b = np.full((rows, 4), 0.5, np.float32)
    out = next(model.infer(inputs={"A": a, "B": b})).outputs
    np.testing.assert_array_equal(np.from_dlpack(out["SUM"]), a + b)
    np.testing.assert_array_equal(np.from_dlpack(out["DIFF"]), a - b)


def explicit_server(tmp_path, **options):
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    options.setdefault("strict_model_config", False)
    return start_server(model_repository=str(repo), model_control_mode=EXPLICIT,
                        **options), str(repo)


def tensors(config: dict) -> list:
    return [(t["name"], t["data_type"], [int(d) for d in t["dims"]])
            for t in config["input"] + config["output"]]


def test_a_bare_model_xml_is_routed_to_openvino_and_completed(explicit):
    s, repo = explicit
    models.write(repo, "bare", models.add_sub())  # layout empty: no batching
    s.load("bare")
    config = s.model("bare").config()
    assert config["backend"] == "openvino"
    assert int(config.get("max_batch_size", 0)) == 0 and "dynamic_batching" not in config
    # Dims all -1: the shape [?,4] is not fully static (Triton's rule).
    assert tensors(config) == [(n, "TYPE_FP32", [-1, -1]) for n in ("A", "B", "SUM", "DIFF")]
    add_sub_works(s.model("bare"))


def test_static_shapes_are_completed_as_they_are(explicit):
    s, repo = explicit
    models.write(repo, "fixed", models.fixed_add(4))
    s.load("fixed")
    assert tensors(s.model("fixed").config()) == [("X", "TYPE_FP32", [4]),
                                                  ("Y", "TYPE_FP32", [4])]
    out = next(s.model("fixed").infer(inputs={"X": np.arange(4, dtype=np.float32)})).outputs
    assert np.from_dlpack(out["Y"]).tolist() == [1.0, 2.0, 3.0, 4.0]


def test_a_batch_layout_gives_the_core_s_default_max_batch_size(explicit):
    """The core hands every backend default-max-batch-size 4 (backend_model.cc)."""
    s, repo = explicit
    models.write(repo, "laid_out", models.add_sub(), batch_layout=True)
    s.load("laid_out")
    config = s.model("laid_out").config()
    assert int(config["max_batch_size"]) == 4 and "dynamic_batching" in config
    assert tensors(config) == [(n, "TYPE_FP32", [-1]) for n in ("A", "B", "SUM", "DIFF")]
    add_sub_works(s.model("laid_out"), rows=4)  # a static batch of 4


@pytest.mark.parametrize("setting, expected", [("8", 8), ("0", 1)])
def test_the_default_max_batch_size_setting(tmp_path, setting, expected):
    """At least 1 for a batching model; dynamic batching from 2 on."""
    s, repo = explicit_server(tmp_path, backend_configuration={
        "openvino": {"default-max-batch-size": setting}})
    try:
        models.write(repo, "laid_out", models.add_sub(), batch_layout=True)
        s.load("laid_out")
        config = s.model("laid_out").config()
        assert int(config["max_batch_size"]) == expected
        assert ("dynamic_batching" in config) == (expected > 1)
        assert tensors(config) == [(n, "TYPE_FP32", [-1]) for n in ("A", "B", "SUM", "DIFF")]
        add_sub_works(s.model("laid_out"), rows=expected)
        # Only max_batch_size is filled where inputs and outputs are listed.
        models.write(repo, "listed", models.add_sub(), """
input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "DIFF" data_type: TYPE_FP32 dims: [ 4 ] } ]
parameters { key: "ENABLE_BATCH_PADDING" value: { string_value: "yes" } }
""", batch_layout=True)
        s.load("listed")
        config = s.model("listed").config()
        assert int(config["max_batch_size"]) == expected
        assert tensors(config) == [(n, "TYPE_FP32", [4]) for n in ("A", "B", "SUM", "DIFF")]
        add_sub_works(s.model("listed"), rows=1)
    finally:
        stop_within(s)


def test_a_listed_input_list_is_kept_and_the_outputs_filled(explicit):
    s, repo = explicit
    models.write(repo, "half", models.add_sub(), """
input [ { name: "A" data_type: TYPE_FP32 dims: [ -1, 4 ] },
        { name: "B" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]
""")
    s.load("half")
    assert tensors(s.model("half").config()) == [
        ("A", "TYPE_FP32", [-1, 4]), ("B", "TYPE_FP32", [-1, 4]),
        ("SUM", "TYPE_FP32", [-1, -1]), ("DIFF", "TYPE_FP32", [-1, -1])]
    add_sub_works(s.model("half"))


def test_a_model_without_a_layout_and_max_batch_size_loads(explicit):
    """Triton only warns: many IR models have no layout yet batch."""
    s, repo = explicit
    models.write(repo, "no_layout", models.add_sub(), """
backend: "openvino"
max_batch_size: 2
input [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] },
         { name: "DIFF" data_type: TYPE_FP32 dims: [ 4 ] } ]
""")
    s.load("no_layout")
    add_sub_works(s.model("no_layout"), rows=2)


def test_default_model_filename_names_an_onnx_file_openvino_reads(explicit):
    s, repo = explicit
    models.write(repo, "from_onnx", models.add_sub(),
                 ADD_SUB + 'default_model_filename: "model.onnx"\n', onnx_file="model.onnx")
    s.load("from_onnx")
    add_sub_works(s.model("from_onnx"))


def test_a_missing_model_file_is_named(explicit):
    s, repo = explicit
    models.write(repo, "missing", models.add_sub(), ADD_SUB + 'default_model_filename: "x.xml"\n')
    with pytest.raises(tritonserver.TritonError, match=r"unable to find '.*missing/1/x\.xml' "
                                                       r"for model 'missing'"):
        s.load("missing")
    assert s.live()


@pytest.mark.parametrize("config_type", ["TYPE_FP64", "TYPE_BF16", "TYPE_STRING"])
def test_unsupported_data_types_are_refused(explicit, config_type):
    s, repo = explicit
    onnx_type = models.onnx_models.TYPES.get(config_type, models.onnx_models.TYPES["TYPE_FP32"])
    models.write(repo, "refused", models.identities({config_type: onnx_type}),
                 identity_config([config_type]))
    with pytest.raises(tritonserver.TritonError,
                       match=f"unsupported datatype {config_type} for input "
                             f"'IN_{config_type[5:]}' for model 'refused'"):
        s.load("refused")
    assert s.live()


def test_a_config_type_other_than_the_model_s_is_converted(explicit):
    """FP16 in the configuration, FP32 in the model: OpenVINO converts."""
    s, repo = explicit
    models.write(repo, "half_precision", models.add_sub(), ADD_SUB.replace("TYPE_FP32", "TYPE_FP16"))
    s.load("half_precision")
    a = np.array([[1.5, 2.0, -3.0, 4.25]], np.float16)
    out = next(s.model("half_precision").infer(inputs={"A": a, "B": a})).outputs
    total = np.from_dlpack(out["SUM"])
    assert total.dtype == np.float16 and total.tolist() == (a + a).tolist()


def test_configuration_mismatches_give_triton_s_texts(explicit):
    """(An input count other than the model's: test_loading.py.)"""
    s, repo = explicit
    models.write(repo, "named", models.add_sub(), ADD_SUB.replace('"B"', '"C"'))
    with pytest.raises(tritonserver.InvalidArgumentError,
                       match="unexpected inference input 'C', allowed inputs are: A, B"):
        s.load("named")
    models.write(repo, "dims", models.fixed_add(4), """
backend: "openvino"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 5 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
""")
    with pytest.raises(tritonserver.InvalidArgumentError,
                       match=r"model 'dims', tensor 'X': the model expects 1 dimensions "
                             r"\(shape \[4\]\) but the model configuration specifies 1 "
                             r"dimensions \(shape \[5\]\)"):
        s.load("dims")
    assert s.live()


def with_parameters(**parameters) -> str:
    return ADD_SUB + "".join(f'parameters {{ key: "{k}" value: {{ string_value: "{v}" }} }}\n'
                             for k, v in parameters.items())


def test_good_parameters_load(explicit):
    s, repo = explicit
    models.write(repo, "tuned", models.add_sub(), with_parameters(
        INFERENCE_NUM_THREADS="1", COMPILATION_NUM_THREADS="1", NUM_STREAMS="1",
        PERFORMANCE_HINT="Latency", SKIP_OV_DYNAMIC_BATCHSIZE="maybe",
        ENABLE_BATCH_PADDING="no", RESHAPE_IO_LAYERS="false"))
    s.load("tuned")
    add_sub_works(s.model("tuned"))
    models.write(repo, "streams", models.add_sub(), with_parameters(NUM_STREAMS="auto", HINT_BF16="yes",
                                                                    PERFORMANCE_HINT="THROUGHPUT"))
    s.load("streams")
    add_sub_works(s.model("streams"))


@pytest.mark.parametrize("key, value, message", [
    ("INFERENCE_NUM_THREADS", "-1",
     "expected the parameter 'INFERENCE_NUM_THREADS' to be a non-negative number, got -1"),
    ("COMPILATION_NUM_THREADS", "Two",
     "expected the parameter 'COMPILATION_NUM_THREADS' to be a non-negative number, got two"),
    ("HINT_BF16", "no", "expected the parameter 'HINT_BF16' to be YES, got no"),
    ("NUM_STREAMS", "many",
     "expected the parameter 'NUM_STREAMS' to be either AUTO/NUMA/<int_value>, got many"),
    ("PERFORMANCE_HINT", "FAST", ("expected the parameter 'PERFORMANCE_HINT' to be "
                                  "LATENCY/THROUGHPUT/CUMULATIVE_THROUGHPUT, got fast")),
])
def test_bad_parameters_fail_the_load_with_triton_s_texts(explicit, key, value, message):
    s, repo = explicit
    models.write(repo, "bad", models.add_sub(), with_parameters(**{key: value}))
    with pytest.raises(tritonserver.InvalidArgumentError, match=message.replace("|", r"\|")):
        s.load("bad")
    assert s.live()


def test_reshape_io_layers_takes_the_configured_dims(explicit):
    s, repo = explicit
    models.write(repo, "reshaped", models.add_sub(), with_parameters(RESHAPE_IO_LAYERS="Yes")
                 .replace("[ -1, 4 ]", "[ 2, 4 ]"))
    s.load("reshaped")
    add_sub_works(s.model("reshaped"), rows=2)


def test_gpu_instances_are_refused(explicit):
    s, repo = explicit
    models.write(repo, "gpu", models.add_sub(),
                 ADD_SUB + "instance_group [ { kind: KIND_GPU count: 1 } ]\n")
    with pytest.raises(tritonserver.TritonError):
        s.load("gpu")
    assert s.live()


BATCHED = """
backend: "openvino"
max_batch_size: 8
dynamic_batching {{ max_queue_delay_microseconds: 200000 }}
input [ {{ name: "A" data_type: TYPE_FP32 dims: [ 4 ] }},
        {{ name: "B" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "SUM" data_type: TYPE_FP32 dims: [ 4 ] }},
         {{ name: "DIFF" data_type: TYPE_FP32 dims: [ 4 ] }} ]
{parameters}
"""
PADDING = 'parameters { key: "ENABLE_BATCH_PADDING" value: { string_value: "Yes" } }'


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("openvino_repo"))
    models.write(root, "padded", models.add_sub(), BATCHED.format(parameters=PADDING))
    models.write(root, "unpadded", models.add_sub(), BATCHED.format(parameters=""))
    return root


def test_a_smaller_batch_is_padded_and_trimmed(server, repo):
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2))
    out = next(server.model("padded").infer(inputs={"A": a, "B": b})).outputs
    expected = openvino_answers(repo, "padded", {"A": a, "B": b})
    for name in ("SUM", "DIFF"):
        got = np.from_dlpack(out[name])
        assert got.shape == (3, 4)
        np.testing.assert_allclose(got, expected[name], rtol=1e-6)


def test_without_padding_only_full_batches_run(server):
    model = server.model("unpadded")
    full = np.ones((8, 4), np.float32)
    out = next(model.infer(inputs={"A": full, "B": full})).outputs
    assert np.from_dlpack(out["SUM"]).tolist() == [[2.0] * 4] * 8
    small = np.ones((2, 4), np.float32)
    with pytest.raises(tritonserver.TritonError,
                       match="expected requests with batch size '8', got '2'... this error can "
                             "be avoided by setting 'ENABLE_BATCH_PADDING' parameter"):
        list(model.infer(inputs={"A": small, "B": small}))
    assert server.live()
    out = next(model.infer(inputs={"A": full, "B": full})).outputs
    assert np.from_dlpack(out["DIFF"]).tolist() == [[0.0] * 4] * 8
