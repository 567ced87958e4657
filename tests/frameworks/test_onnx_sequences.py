"""Stateful ONNX models as Triton's onnxruntime backend serves them: the
sequence batcher's control tensors as graph inputs, implicit state fed back
between the requests of a sequence (direct and oldest strategies), optional
inputs, ragged inputs with a batch input and a scattered batch output;
through the in-process API and tritonclient's sequence calls."""

from __future__ import annotations

import asyncio
import itertools
import queue
import threading

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stats_when, stop_within

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from frameworks import models_onnx as models  # noqa: E402

EXPLICIT = tritonserver.ModelControlMode.EXPLICIT
START, END = 1, 2  # TRITONSERVER_REQUEST_FLAG_SEQUENCE_START / _END (request flags)

CONTROLS = """
platform: "onnxruntime_onnx"
max_batch_size: 4
sequence_batching {
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY fp32_false_true: [ 0, 1 ] } ] }
  ]
}
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

RUNNING_SUM = """
platform: "onnxruntime_onnx"
max_batch_size: 4
sequence_batching {
  %s
  state [ { input_name: "INPUT_STATE" output_name: "OUTPUT_STATE" data_type: TYPE_FP32
            dims: [ 1 ]
            initial_state { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true name: "zero" } } ]
}
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "OUTPUT" data_type: TYPE_FP32 dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""

OPTIONAL = """
platform: "onnxruntime_onnx"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] },
        { name: "OFFSET" data_type: TYPE_FP32 dims: [ 4 ] optional: true } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""

RAGGED = """
platform: "onnxruntime_onnx"
max_batch_size: 8
dynamic_batching { max_queue_delay_microseconds: 300000 }
input [ { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "INDEX"
                data_type: TYPE_FP32 source_input: "INPUT" } ]
output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]
batch_output [ { target_name: "OUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT" } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("onnx_sequences"))
    models.write(root, "controls", models.sequence_controls(), CONTROLS)
    models.write(root, "sum_direct", models.running_sum(), RUNNING_SUM % "direct { }")
    models.write(root, "sum_oldest", models.running_sum(), RUNNING_SUM % (
        "oldest { max_candidate_sequences: 4 max_queue_delay_microseconds: 20000 }"))
    models.write(root, "sum_batches", models.running_sum(), RUNNING_SUM % (
        "oldest { max_candidate_sequences: 4 max_queue_delay_microseconds: 20000 }"))
    models.write(root, "optional", models.with_default(), OPTIONAL)
    models.write(root, "ragged", models.ragged_scale(), RAGGED)
    s = start_server(model_repository=root)
    yield s
    stop_within(s)


def step(model, value: float, sequence, flags: int = 0) -> float:
    x = np.array([[value]], np.float32)
    (response,) = list(model.infer(inputs={"INPUT": x}, correlation_id=sequence, flags=flags))
    return float(np.from_dlpack(response.outputs["OUTPUT"])[0, 0])


def run_sequence(model, sequence, values: list, flags_last: int = END) -> list:
    return [step(model, v, sequence, (START if k == 0 else 0)
                 | (flags_last if k == len(values) - 1 else 0))
            for k, v in enumerate(values)]


def test_control_inputs_are_graph_inputs(server):
    """The model that failed to load with "the configuration expects 1
    inputs, the model provides 3": START and READY are filled by the core."""
    model = server.model("controls")
    assert run_sequence(model, 11, [1.0, 2.0, 3.0]) == [101.0, 2.0, 3.0]
    assert run_sequence(model, "seq-text", [5.0, 6.0]) == [105.0, 6.0]


@pytest.mark.parametrize("name", ["sum_direct", "sum_oldest"])
def test_implicit_state_is_fed_back(server, name):
    """Several sequences at once, each in its own thread: every one sees
    its own running sum (the state the previous request left)."""
    model = server.model(name)
    sequences = {100 + s: [float(v) for v in np.random.default_rng(s).integers(-9, 10, 8)]
                 for s in range(6)}
    results: queue.Queue = queue.Queue()

    def run(sequence, values):
        try:
            results.put((sequence, run_sequence(model, sequence, values)))
        except Exception as e:  # reported below
            results.put((sequence, e))

    threads = [threading.Thread(target=run, args=item) for item in sequences.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    got = dict(results.get_nowait() for _ in threads)
    for sequence, values in sequences.items():
        assert got[sequence] == np.cumsum(values).tolist(), (sequence, got[sequence])
    # A new sequence on a used id starts again from the initial state.
    assert run_sequence(model, 100, [4.0, 1.0]) == [4.0, 5.0]


def test_state_across_batches_of_the_oldest_strategy(server):
    """With `oldest`, requests of different sequences share a batch: the
    states come back each to its own sequence."""
    model = server.model("sum_batches")  # used by this test alone
    sums: list = []
    for round_ in range(3):
        threads = [threading.Thread(target=lambda s: sums.append(
            run_sequence(model, 500 + s, [1.0 + s] * 6)), args=(s,)) for s in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert sorted(sums) == sorted([[(1.0 + s) * k for k in range(1, 7)] for s in range(4)] * 3)
    stats = stats_when(model, lambda st: st["inference_count"] >= 3 * 4 * 6)
    assert stats["inference_count"] == 3 * 4 * 6
    assert stats["execution_count"] < stats["inference_count"], \
        "the oldest strategy formed no batch of sequences"
    assert run_sequence(model, 77, [2.0, 2.0, 2.0]) == [2.0, 4.0, 6.0]


def test_optional_input(server):
    model = server.model("optional")
    x = np.arange(4, dtype=np.float32)
    (alone,) = list(model.infer(inputs={"X": x}))
    assert np.from_dlpack(alone.outputs["Y"]).tolist() == (x + 10).tolist()
    (given,) = list(model.infer(inputs={"X": x, "OFFSET": np.ones(4, np.float32)}))
    assert np.from_dlpack(given.outputs["Y"]).tolist() == (x + 1).tolist()


def test_optional_input_with_batching_is_refused(tmp_path):
    models.write(str(tmp_path), "optional", models.with_default(),
                 OPTIONAL.replace('platform: "onnxruntime_onnx"',
                                  'platform: "onnxruntime_onnx"\nmax_batch_size: 2'))
    s = start_server(model_repository=str(tmp_path), model_control_mode=EXPLICIT)
    try:
        with pytest.raises(tritonserver.TritonError) as e:
            s.load("optional")
        assert ("optional input 'OFFSET' is not supported for models that support batching"
                in str(e.value))
    finally:
        stop_within(s)


def test_ragged_batch_with_batch_input_and_scattered_output(server):
    """Three requests of 2, 3 and 4 elements in one batch: the model sees
    one flat INPUT of 9 and INDEX [2, 5, 9]; each request gets its own
    elements back in its own shape (times the batch's 9 elements)."""
    model = server.model("ragged")
    inputs = [np.arange(n, dtype=np.float32).reshape(1, n) + n for n in (2, 3, 4)]

    async def gather():
        async def one(x):
            return [r async for r in model.async_infer(inputs={"INPUT": x})]
        return await asyncio.gather(*(one(x) for x in inputs))

    answers = asyncio.run(gather())
    stats = stats_when(model, lambda st: st["inference_count"] >= 3)
    sizes = [x.size for x in inputs]
    for x, (response,) in zip(inputs, answers):
        out = np.from_dlpack(response.outputs["OUT"])
        assert out.shape == x.shape
        scale = float(out[0, 0] / x[0, 0])
        # the element count of the batch this request ran in: its own size
        # plus those of any others in the same batch
        possible = {x.size + sum(c) for r in range(3) for c in itertools.combinations(
            [n for n in sizes if n != x.size], r)}
        assert scale in possible and out.tolist() == (x * scale).tolist(), (scale, possible)
    if stats["execution_count"] == 1:
        assert float(np.from_dlpack(answers[0][0].outputs["OUT"])[0, 0]) == 2 * 9


def test_sequences_over_tritonclient(server):
    """tritonclient's sequence calls, synchronous over HTTP and streaming
    over gRPC, on the implicit-state model."""
    grpcclient = pytest.importorskip("tritonclient.grpc")
    httpclient = pytest.importorskip("tritonclient.http")
    from tritonserver.frontends import KServeGrpc, KServeHttp

    http = KServeHttp(server, KServeHttp.Options(port=0)).start()
    grpc = KServeGrpc(server, KServeGrpc.Options(port=0)).start()
    try:
        client = httpclient.InferenceServerClient(http.url)
        got = []
        for k, value in enumerate([3.0, 4.0, 5.0]):
            inp = httpclient.InferInput("INPUT", [1, 1], "FP32")
            inp.set_data_from_numpy(np.array([[value]], np.float32))
            got.append(float(client.infer("sum_direct", [inp], sequence_id=901,
                                          sequence_start=k == 0,
                                          sequence_end=k == 2).as_numpy("OUTPUT")[0, 0]))
        assert got == [3.0, 7.0, 12.0]

        results: queue.Queue = queue.Queue()
        stream = grpcclient.InferenceServerClient(grpc.url)
        stream.start_stream(callback=lambda result, error: results.put((result, error)))
        sequences = {902: [1.0, 2.0, 3.0, 4.0], 903: [10.0, 20.0, 30.0, 40.0]}
        for k in range(4):
            for sequence, values in sequences.items():
                inp = grpcclient.InferInput("INPUT", [1, 1], "FP32")
                inp.set_data_from_numpy(np.array([[values[k]]], np.float32))
                stream.async_stream_infer("sum_oldest", [inp], request_id=f"{sequence}_{k}",
                                          sequence_id=sequence, sequence_start=k == 0,
                                          sequence_end=k == 3)
        answers: dict = {902: {}, 903: {}}
        for _ in range(8):
            result, error = results.get(timeout=30)
            assert error is None, error
            sequence, k = result.get_response().id.split("_")
            answers[int(sequence)][int(k)] = float(result.as_numpy("OUTPUT")[0, 0])
        stream.stop_stream()
        for sequence, values in sequences.items():
            assert [answers[sequence][k] for k in range(4)] == np.cumsum(values).tolist()
    finally:
        http.stop(timeout=5)
        grpc.stop(timeout=5)
