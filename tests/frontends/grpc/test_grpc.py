"""KServeGrpc with the real tritonclient.grpc (sync and asyncio): every RPC
of inference.GRPCInferenceService that needs no shared memory, streaming
with decoupled models, TLS, the health service, restrictions, limits."""

from __future__ import annotations

import asyncio
import json
import queue
import time

import grpc
import numpy as np
import pytest

import tritonserver
from frontends import support
from frontends.conftest import Endpoints

import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.grpc.aio as aiogrpcclient  # noqa: E402
from tritonclient.utils import InferenceServerException  # noqa: E402

from tritonserver.frontends import KServeGrpc  # noqa: E402
from tritonserver.frontends.grpc.protos import messages  # noqa: E402

TIMEOUT = 60


@pytest.fixture(scope="module")
def client(endpoints: Endpoints):
    c = grpcclient.InferenceServerClient(endpoints.grpc_url)
    yield c
    c.close()


def fp32_input(x: np.ndarray) -> grpcclient.InferInput:
    inp = grpcclient.InferInput("INPUT0", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    return inp


def int32_input(name: str, values: list[int]) -> grpcclient.InferInput:
    inp = grpcclient.InferInput(name, [len(values)], "INT32")
    inp.set_data_from_numpy(np.array(values, dtype=np.int32))
    return inp


def status_of(error: InferenceServerException) -> str:
    return str(error.status())


# ---- Health, metadata, configuration, statistics ---------------------------------------


def test_health_and_metadata(client, endpoints):
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("identity_fp32") and client.is_model_ready("identity_fp32", "1")
    assert not client.is_model_ready("no_such_model")
    metadata = client.get_server_metadata(as_json=True)
    assert metadata["name"] == "triton"
    assert metadata["version"] == endpoints.server.metadata()["version"]
    model = client.get_model_metadata("add_sub_int32", as_json=True)
    assert model["name"] == "add_sub_int32" and model["versions"] == ["1"]
    assert [i["name"] for i in model["inputs"]] == ["INPUT0", "INPUT1"]
    assert model["inputs"][0] == {"name": "INPUT0", "datatype": "INT32", "shape": ["-1"]}
    with pytest.raises(InferenceServerException) as e:
        client.get_model_metadata("no_such_model")
    assert status_of(e.value) == "StatusCode.NOT_FOUND"


def test_model_config_matches_the_core(client, endpoints):
    for name in ("accumulate_int64", "repeat_int32", "identity_mixed", "python_echo_params"):
        config = client.get_model_config(name).config
        core = endpoints.server.model(name).config()
        assert config.name == name and config.backend == core["backend"]
        assert config.max_batch_size == core["max_batch_size"]
        assert [i.name for i in config.input] == [i["name"] for i in core["input"]]
        assert [list(i.dims) for i in config.input] == [i["dims"] for i in core["input"]]
    config = client.get_model_config("accumulate_int64").config
    assert config.sequence_batching.max_sequence_idle_microseconds == 60000000
    assert config.WhichOneof("scheduling_choice") == "sequence_batching"
    assert client.get_model_config("repeat_int32").config.model_transaction_policy.decoupled
    mixed = client.get_model_config("identity_mixed", as_json=True)["config"]
    assert [i["data_type"] for i in mixed["input"]] == [
        "TYPE_FP16", "TYPE_BOOL", "TYPE_INT8", "TYPE_UINT64", "TYPE_FP64", "TYPE_BF16"]


def test_statistics(client):
    client.infer("identity_fp32", [fp32_input(np.zeros(2, np.float32))])
    support.wait_until(
        lambda: client.get_inference_statistics("identity_fp32").model_stats[0].inference_count
        > 0, what="statistics")
    every = client.get_inference_statistics().model_stats
    assert {s.name for s in every} >= {"identity_fp32", "repeat_int32"}
    one = client.get_inference_statistics("identity_fp32", "1").model_stats
    assert [s.name for s in one] == ["identity_fp32"]
    assert one[0].inference_stats.success.count >= 1


# ---- Inference ----------------------------------------------------------------------------


def test_infer_types(client):
    x = np.linspace(0, 1, 17, dtype=np.float32)
    result = client.infer("identity_fp32", [fp32_input(x)],
                          outputs=[grpcclient.InferRequestedOutput("OUTPUT0")])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x)
    assert result.get_response().model_version == "1"
    values = np.array([b"a", b"", b"\x00\xff", "ü".encode()], dtype=object)
    inp = grpcclient.InferInput("INPUT0", [4], "BYTES")
    inp.set_data_from_numpy(values)
    assert client.infer("identity_bytes", [inp]).as_numpy("OUTPUT0").tolist() == values.tolist()
    arrays = [("FP16", np.array([0.5, -2, 1000], np.float16)),
              ("BOOL", np.array([True, False, False])),
              ("INT8", np.array([-1, 2, -128], np.int8)),
              ("UINT64", np.array([2**63, 1, 0], np.uint64)),
              ("FP64", np.array([np.pi, -1e-300, 7]))]
    arrays.append(("BF16", support.client_bf16([1.5, -8, 0.25])))
    inputs = []
    for i, (datatype, array) in enumerate(arrays):
        inp = grpcclient.InferInput(f"INPUT{i}", [3], datatype)
        inp.set_data_from_numpy(array)
        inputs.append(inp)
    result = client.infer("identity_mixed", inputs)
    for i, (datatype, array) in enumerate(arrays):
        got = result.as_numpy(f"OUTPUT{i}")
        assert got.tobytes() == array.tobytes(), datatype


def test_requested_outputs_and_parameters(client):
    a, b = [5, 6, 7], [1, 1, 1]
    result = client.infer("add_sub_int32", [int32_input("INPUT0", a), int32_input("INPUT1", b)],
                          outputs=[grpcclient.InferRequestedOutput("OUTPUT1")])
    assert [o.name for o in result.get_response().outputs] == ["OUTPUT1"]
    assert result.as_numpy("OUTPUT1").tolist() == [4, 5, 6]
    with pytest.raises(InferenceServerException) as e:
        client.infer("add_sub_int32", [int32_input("INPUT0", a), int32_input("INPUT1", b)],
                     outputs=[grpcclient.InferRequestedOutput("NOPE")])
    assert status_of(e.value) == "StatusCode.INVALID_ARGUMENT"
    result = client.infer("python_echo_params", [fp32_input(np.zeros(1, np.float32))],
                          request_id="abc", parameters={"k": "v", "n": -4, "on": True,
                                                        "x": 0.25})
    seen = json.loads(result.as_numpy("PARAMS")[0])
    assert seen == {"parameters": {"k": "v", "n": -4, "on": True, "x": 0.25},
                    "request_id": "abc"}
    assert result.get_response().id == "abc"


def test_sequences(client):
    def step(seq, value, start=False, end=False):
        inp = grpcclient.InferInput("INPUT", [1], "INT64")
        inp.set_data_from_numpy(np.array([value], dtype=np.int64))
        return int(client.infer("accumulate_int64", [inp], sequence_id=seq,
                                sequence_start=start, sequence_end=end).as_numpy("OUTPUT")[0])

    assert step(7, 1, start=True) == 1
    assert step("seq-b", 10, start=True) == 10
    assert step(7, 2) == 3
    assert step("seq-b", 5, end=True) == 15
    assert step(7, 3, end=True) == 6


def test_errors(client):
    with pytest.raises(InferenceServerException) as e:
        client.infer("no_such_model", [fp32_input(np.zeros(1, np.float32))])
    assert status_of(e.value) == "StatusCode.NOT_FOUND"
    inp = grpcclient.InferInput("INPUT0", [2], "INT32")
    inp.set_data_from_numpy(np.zeros(2, np.int32))
    with pytest.raises(InferenceServerException) as e:
        client.infer("identity_fp32", [inp])
    assert status_of(e.value) == "StatusCode.INVALID_ARGUMENT"
    with pytest.raises(InferenceServerException) as e:
        client.infer("repeat_int32", [int32_input("IN", [1])])
    assert status_of(e.value) == "StatusCode.UNIMPLEMENTED" and "decoupled" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        client.infer("identity_fp32", [fp32_input(np.zeros(1, np.float32))], model_version="x")
    assert status_of(e.value) == "StatusCode.INVALID_ARGUMENT"
    with pytest.raises(InferenceServerException) as e:
        client.update_trace_settings(settings={"trace_file": "x"})
    assert status_of(e.value) == "StatusCode.UNIMPLEMENTED"


def test_contents_instead_of_raw(endpoints):
    """Tensors as typed InferTensorContents (what non-tritonclient clients may send)."""
    m = messages()
    with grpc.insecure_channel(endpoints.grpc_url) as channel:
        infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                    request_serializer=m.ModelInferRequest.SerializeToString,
                                    response_deserializer=m.ModelInferResponse.FromString)
        request = m.ModelInferRequest(model_name="add_sub_int32")
        for name, values in (("INPUT0", [1, 2, 3]), ("INPUT1", [10, 20, 30])):
            tensor = request.inputs.add(name=name, datatype="INT32", shape=[3])
            tensor.contents.int_contents.extend(values)
        response = infer(request, timeout=TIMEOUT)
        got = {o.name: np.frombuffer(raw, np.int32).tolist()
               for o, raw in zip(response.outputs, response.raw_output_contents)}
        assert got == {"OUTPUT0": [11, 22, 33], "OUTPUT1": [-9, -18, -27]}
        bad = m.ModelInferRequest(model_name="identity_bytes")
        tensor = bad.inputs.add(name="INPUT0", datatype="BYTES", shape=[3])
        tensor.contents.bytes_contents.extend([b"a", b"b"])
        with pytest.raises(grpc.RpcError) as e:
            infer(bad, timeout=TIMEOUT)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        garbage = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")
        with pytest.raises(grpc.RpcError) as e:
            garbage(b"\xff\xff\xff\xff not a message", timeout=TIMEOUT)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# ---- Streaming ----------------------------------------------------------------------------


def test_stream_decoupled_and_errors(client):
    results: queue.Queue = queue.Queue()
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        client.async_stream_infer("repeat_int32", [int32_input("IN", [4, 0, 9])],
                                  request_id="first")
        client.async_stream_infer("no_such_model", [int32_input("IN", [1])], request_id="bad")
        client.async_stream_infer("repeat_int32", [int32_input("IN", [2, 2])],
                                  request_id="second", enable_empty_final_response=True)
        client.async_stream_infer("identity_fp32", [fp32_input(np.ones(3, np.float32))],
                                  request_id="third")
        got: dict = {}
        errors = []
        finals = []
        for _ in range(3 + 1 + 3 + 1):  # responses + error + empty final + identity
            result, error = results.get(timeout=TIMEOUT)
            if error is not None:
                errors.append(error)
                continue
            response = result.get_response()
            if response.parameters["triton_final_response"].bool_param:
                finals.append(response.id)
            if not response.outputs:
                continue
            name = response.outputs[0].name
            got.setdefault(response.id, []).append(result.as_numpy(name).tolist())
        assert got["first"] == [[4], [0], [9]] and got["second"] == [[2], [2]]
        assert got["third"] == [[1.0, 1.0, 1.0]]
        assert len(errors) == 1 and "no_such_model" in str(errors[0])
        assert sorted(finals) == ["second", "third"]
        assert results.empty()
    finally:
        client.stop_stream()


def test_aio_client_infer_and_stream(endpoints):
    async def run() -> None:
        c = aiogrpcclient.InferenceServerClient(endpoints.grpc_url)
        try:
            assert await c.is_server_live()
            metadata = await c.get_model_metadata("identity_fp32", as_json=True)
            assert metadata["name"] == "identity_fp32"

            async def one(i: int) -> list:
                inp = aiogrpcclient.InferInput("INPUT0", [4], "FP32")
                inp.set_data_from_numpy(np.full(4, i, np.float32))
                return (await c.infer("identity_fp32", [inp],
                                      client_timeout=TIMEOUT)).as_numpy("OUTPUT0").tolist()

            assert await asyncio.gather(*(one(i) for i in range(16))) == \
                [[float(i)] * 4 for i in range(16)]

            async def requests():
                for values in ([1, 2, 3], [7]):
                    inp = aiogrpcclient.InferInput("IN", [len(values)], "INT32")
                    inp.set_data_from_numpy(np.array(values, np.int32))
                    yield {"model_name": "repeat_int32", "inputs": [inp],
                           "request_id": str(values[0])}

            seen: dict = {}
            async for result, error in c.stream_infer(requests(), stream_timeout=TIMEOUT):
                assert error is None
                response = result.get_response()
                seen.setdefault(response.id, []).append(int(result.as_numpy("OUT")[0]))
            assert seen == {"1": [1, 2, 3], "7": [7]}
        finally:
            await c.close()

    asyncio.run(run())


# ---- Repository and logging -----------------------------------------------------------------


def test_repository_load_unload(client):
    index = {m.name: m for m in client.get_model_repository_index().models}
    assert index["identity_fp32"].state == "READY"
    config = {"name": "grpc_loaded", "backend": "identity", "max_batch_size": 0,
              "input": [{"name": "INPUT0", "data_type": "TYPE_FP64", "dims": [-1]}],
              "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP64", "dims": [-1]}]}
    client.load_model("grpc_loaded", config=json.dumps(config),
                      files={"file:1/unused.bin": b"\x00\x01"})
    assert client.is_model_ready("grpc_loaded")
    inp = grpcclient.InferInput("INPUT0", [2], "FP64")
    inp.set_data_from_numpy(np.array([0.5, 2.0]))
    assert client.infer("grpc_loaded", [inp]).as_numpy("OUTPUT0").tolist() == [0.5, 2.0]
    client.unload_model("grpc_loaded", unload_dependents=True)
    support.wait_until(lambda: not client.is_model_ready("grpc_loaded"), what="unload")
    with pytest.raises(InferenceServerException) as e:
        client.load_model("no_such_model_anywhere")
    # Triton's code and text (its QA matches them), then the reason the core logs only.
    assert e.value.status() == "StatusCode.INTERNAL"
    assert e.value.message().startswith(
        "failed to load 'no_such_model_anywhere', failed to poll from model repository: model "
        "not found in any model repository")
    with pytest.raises(InferenceServerException) as e:
        client.load_model("grpc_loaded", config="{not json", files={"file:1/x.bin": b"x"})
    assert e.value.status() == "StatusCode.INTERNAL"
    assert "failed to poll from model repository: the 'config' load parameter is not valid " \
        "JSON (" in e.value.message()
    ready_only = {m.name for m in client.get_model_repository_index().models}
    assert "identity_fp32" in ready_only


def test_log_settings(client):
    before = client.get_log_settings(as_json=True)["settings"]
    assert set(before) == {"log_file", "log_info", "log_warning", "log_error",
                           "log_verbose_level", "log_format"}
    try:
        after = client.update_log_settings({"log_verbose_level": 1, "log_warning": True},
                                           as_json=True)["settings"]
        assert after["log_verbose_level"]["uint32_param"] == 1
        assert after["log_warning"]["bool_param"] is True
    finally:
        client.update_log_settings({
            "log_verbose_level": before["log_verbose_level"].get("uint32_param", 0),
            "log_warning": before["log_warning"].get("bool_param", False)})
    with pytest.raises(InferenceServerException) as e:
        client.update_log_settings({"log_file": "elsewhere.log"})
    assert status_of(e.value) == "StatusCode.UNIMPLEMENTED"


# ---- Health service, TLS, restrictions, limits, compression ------------------------------------


def test_grpc_health_service(endpoints):
    m = messages()
    with grpc.insecure_channel(endpoints.grpc_url) as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=m.HealthCheckRequest.SerializeToString,
                                    response_deserializer=m.HealthCheckResponse.FromString)
        serving = m.HealthCheckResponse.ServingStatus.Value("SERVING")
        assert check(m.HealthCheckRequest(), timeout=TIMEOUT).status == serving
        assert check(m.HealthCheckRequest(service="inference.GRPCInferenceService"),
                     timeout=TIMEOUT).status == serving
        with pytest.raises(grpc.RpcError) as e:
            check(m.HealthCheckRequest(service="no.such.Service"), timeout=TIMEOUT)
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        watch = channel.unary_stream("/grpc.health.v1.Health/Watch",
                                     request_serializer=m.HealthCheckRequest.SerializeToString,
                                     response_deserializer=m.HealthCheckResponse.FromString)
        stream = watch(m.HealthCheckRequest(), timeout=TIMEOUT)
        assert next(stream).status == serving
        stream.cancel()


def test_tls_and_mutual_auth(endpoints, tmp_path):
    certs = support.make_certificates(str(tmp_path))
    x = np.arange(3, dtype=np.float32)
    options = KServeGrpc.Options(port=0, use_ssl=True, server_cert=certs["server_cert"],
                                 server_key=certs["server_key"])
    with KServeGrpc(endpoints.server, options) as secure:
        with open(certs["ca"], "rb") as f:
            ca = f.read()
        c = grpcclient.InferenceServerClient(f"localhost:{secure.port}", ssl=True,
                                             root_certificates=certs["ca"])
        try:
            assert c.is_server_live()
            np.testing.assert_array_equal(c.infer("identity_fp32", [fp32_input(x)])
                                          .as_numpy("OUTPUT0"), x)
        finally:
            c.close()
        # A plaintext client cannot talk to it.
        with grpc.insecure_channel(f"127.0.0.1:{secure.port}") as channel:
            live = channel.unary_unary("/inference.GRPCInferenceService/ServerLive")
            with pytest.raises(grpc.RpcError):
                live(messages().ServerLiveRequest().SerializeToString(), timeout=10)
        assert ca
    mutual = KServeGrpc.Options(port=0, use_ssl=True, use_mutual_auth=True,
                                server_cert=certs["server_cert"], server_key=certs["server_key"],
                                root_cert=certs["ca"])
    with KServeGrpc(endpoints.server, mutual) as secure:
        target = f"localhost:{secure.port}"
        c = grpcclient.InferenceServerClient(target, ssl=True, root_certificates=certs["ca"],
                                             private_key=certs["client_key"],
                                             certificate_chain=certs["client_cert"])
        try:
            assert c.is_server_ready()
            np.testing.assert_array_equal(c.infer("identity_fp32", [fp32_input(x)])
                                          .as_numpy("OUTPUT0"), x)
        finally:
            c.close()
        anonymous = grpcclient.InferenceServerClient(target, ssl=True,
                                                     root_certificates=certs["ca"])
        try:
            with pytest.raises(InferenceServerException):
                anonymous.is_server_live()
        finally:
            anonymous.close()
    with pytest.raises(tritonserver.InvalidArgumentError):
        KServeGrpc(endpoints.server, KServeGrpc.Options(use_ssl=True))
    with pytest.raises(tritonserver.InvalidArgumentError):
        KServeGrpc(endpoints.server, KServeGrpc.Options(
            use_ssl=True, server_cert=str(tmp_path / "missing.pem"),
            server_key=certs["server_key"]))


def test_restricted_protocols(endpoints):
    options = KServeGrpc.Options(port=0, restricted_features=[
        "model-repository,logging:admin-key=secret"])
    with KServeGrpc(endpoints.server, options) as guarded:
        c = grpcclient.InferenceServerClient(guarded.url)
        try:
            with pytest.raises(InferenceServerException) as e:
                c.get_model_repository_index()
            assert status_of(e.value) == "StatusCode.UNAVAILABLE"
            assert "triton-grpc-protocol-admin-key" in e.value.message()
            with pytest.raises(InferenceServerException):
                c.get_model_repository_index(headers={"triton-grpc-protocol-admin-key": "no"})
            assert c.get_model_repository_index(
                headers={"triton-grpc-protocol-admin-key": "secret"}).models
            assert c.get_log_settings(headers={"triton-grpc-protocol-admin-key": "secret"})
            assert c.is_server_live()  # health is not restricted
        finally:
            c.close()


def test_max_message_size_and_compression(endpoints):
    options = KServeGrpc.Options(port=0, max_input_size=16 * 1024,
                                 infer_compression_level=KServeGrpc.Grpc_compression_level.HIGH)
    with KServeGrpc(endpoints.server, options) as limited:
        c = grpcclient.InferenceServerClient(limited.url)
        try:
            with pytest.raises(InferenceServerException) as e:
                c.infer("identity_fp32", [fp32_input(np.zeros(8192, np.float32))])
            assert status_of(e.value) == "StatusCode.RESOURCE_EXHAUSTED"
            x = np.arange(1024, dtype=np.float32) % 3
            for algorithm in (None, "gzip", "deflate"):
                result = c.infer("identity_fp32", [fp32_input(x)],
                                 compression_algorithm=algorithm)
                np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x)
        finally:
            c.close()
    with pytest.raises(tritonserver.InvalidArgumentError):
        KServeGrpc(endpoints.server, KServeGrpc.Options(infer_compression_level=9))


def test_contents_beside_raw_contents_is_named_as_triton_names_it(endpoints):
    """As NVIDIA's grpc_explicit_int_content_client.py sends it: int_contents
    for both inputs, then one raw_input_contents added (fewer than the
    inputs) while INPUT0 keeps contents: Triton's text names INPUT0."""
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    with grpc.insecure_channel(endpoints.grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        request = service_pb2.ModelInferRequest(model_name="add_sub_int32")
        for name, values in (("INPUT0", list(range(16))), ("INPUT1", [1] * 16)):
            tensor = request.inputs.add(name=name, datatype="INT32", shape=[16])
            tensor.contents.int_contents[:] = values
        response = stub.ModelInfer(request)
        assert np.frombuffer(response.raw_output_contents[0], np.int32).tolist() == \
            [i + 1 for i in range(16)]
        request.raw_input_contents.extend([np.arange(8, dtype=np.int32).tobytes()])
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(request)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "contents field must not be specified when using raw_input_contents for " \
               "'INPUT0' for model 'add_sub_int32'" in e.value.details()


def test_a_file_name_the_file_system_refuses_fails_the_load_as_internal(client):
    """As NVIDIA's simple_grpc_model_control.py: a "file:" name longer than
    NAME_MAX makes the 2.51 core throw through its C API; Triton answers
    INTERNAL and stays live."""
    with pytest.raises(InferenceServerException) as e:
        client.load_model("grpc_long_name", config="{}", files={"file:" + "A" * 256: b"a"})
    assert e.value.status() == "StatusCode.INTERNAL"
    assert "failed to load 'grpc_long_name'" in e.value.message()
    assert "File name too long" in e.value.message()
    assert client.is_server_live()


def test_a_stream_answers_in_order_what_it_sends_in_a_burst(endpoints):
    """As NVIDIA's simple_grpc_aio_sequence_stream_infer_client.py: several
    sequences sent back to back on one grpc.aio stream. Their requests reach
    the core in the order sent, and each sequence's responses come back in
    that order, with the right running sums (a request sent out of order
    gave wrong sums, a response written out of order wrong positions)."""
    sequences = {2000 + s: [int(v) for v in np.random.default_rng(s).integers(-50, 50, 12)]
                 for s in range(4)}

    async def run() -> dict:
        got: dict = {seq: [] for seq in sequences}
        async with aiogrpcclient.InferenceServerClient(endpoints.grpc_url) as client:
            async def requests():
                for seq, values in sequences.items():
                    for k, value in enumerate(values):
                        inp = aiogrpcclient.InferInput("INPUT", [1], "INT64")
                        inp.set_data_from_numpy(np.array([value], np.int64))
                        yield {"model_name": "accumulate_int64", "inputs": [inp],
                               "request_id": f"{seq}_{k}", "sequence_id": seq,
                               "sequence_start": k == 0, "sequence_end": k == len(values) - 1}

            async for result, error in client.stream_infer(inputs_iterator=requests()):
                assert error is None, error
                seq, k = result.get_response().id.split("_")
                got[int(seq)].append((int(k), int(result.as_numpy("OUTPUT")[0])))
        return got

    for attempt in range(5):
        got = asyncio.run(run())
        for seq, values in sequences.items():
            assert [k for k, _ in got[seq]] == list(range(len(values))), (attempt, seq, got[seq])
            assert [total for _, total in got[seq]] == np.cumsum(values).tolist(), (attempt, seq)


def test_a_cancelled_stream_cancels_its_running_requests(endpoints):
    """tritonclient's stop_stream(cancel_requests=True), as
    qa/L0_backend_python/decoupled's test_decoupled_execute_cancel does it:
    the request running on the stream is cancelled in the core (the model
    sees it and stops), not left to run to its end. A stream the client only
    stops writing to keeps its requests (stop_stream() waits for them)."""
    def failures() -> int:
        stats = endpoints.server.model("sleep_us").statistics()["model_stats"][0]
        return stats["inference_stats"]["fail"]["count"]

    before = failures()
    got: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(endpoints.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: got.put((result, error)))
        delay = grpcclient.InferInput("DELAY_US", [1], "INT64")
        delay.set_data_from_numpy(np.array([120_000_000], np.int64))  # two minutes
        client.async_stream_infer("sleep_us", [delay])
        time.sleep(1.0)  # it reached the model
    finally:
        client.stop_stream(cancel_requests=True)
        client.close()
    support.wait_until(lambda: failures() > before, timeout=30,
                       what="the stream's request to be cancelled in the core")
    # Finished: a short request is answered by the same model at once.
    delay = grpcclient.InferInput("DELAY_US", [1], "INT64")
    delay.set_data_from_numpy(np.array([1000], np.int64))
    with grpcclient.InferenceServerClient(endpoints.grpc_url) as c:
        assert c.infer("sleep_us", [delay]).as_numpy("WAITED_US")[0] >= 1000


def _late_request(client, delay_us: int, timeout_us: int = 0) -> None:
    delay = grpcclient.InferInput("DELAY_US", [1], "INT64")
    delay.set_data_from_numpy(np.array([delay_us], np.int64))
    client.async_stream_infer("sleep_us", [delay], timeout=timeout_us or None)


def test_triton_grpc_error_mode_ends_the_stream_with_the_errors_status(endpoints):
    """Triton's triton_grpc_error stream header (qa/L0_backend_python
    lifecycle): the first error response ends the stream with the core's
    code as the gRPC status; without it the error is a message and the
    stream goes on."""
    for header in (True, False):
        got: queue.Queue = queue.Queue()
        client = grpcclient.InferenceServerClient(endpoints.grpc_url)
        try:
            client.start_stream(callback=lambda result, error: got.put((result, error)),
                                headers={"triton_grpc_error": "true"} if header else None)
            _late_request(client, 1000)
            result, error = got.get(timeout=TIMEOUT)
            assert error is None and result.as_numpy("WAITED_US")[0] >= 1000
            # Its timeout passes in the queue behind a long one: UNAVAILABLE
            # from the core.
            _late_request(client, 3_000_000)
            _late_request(client, 3_000_000)
            _late_request(client, 3_000_000, timeout_us=100_000)
            errors = []
            while len(errors) < 1:
                result, error = got.get(timeout=TIMEOUT)
                if error is not None:
                    errors.append(error)
            if header:
                assert status_of(errors[0]) == "StatusCode.UNAVAILABLE", errors[0]
                assert "timed out" in str(errors[0])
            else:
                assert errors[0].status() is None  # a message on the stream
                _late_request(client, 1000)  # the stream goes on
                while True:
                    result, error = got.get(timeout=TIMEOUT)
                    if error is None and result.as_numpy("WAITED_US")[0] < 1_000_000:
                        break
        finally:
            client.stop_stream(cancel_requests=True)
            client.close()


def test_a_cancelled_unary_call_cancels_its_request(endpoints):
    """tritonclient's async_infer(...).cancel(), as qa/L0_backend_python
    lifecycle's test_execute_cancel: the request is cancelled in the core,
    and the client hears CANCELLED."""
    def failures() -> int:
        stats = endpoints.server.model("sleep_us").statistics()["model_stats"][0]
        return stats["inference_stats"]["fail"]["count"]

    before = failures()
    got: queue.Queue = queue.Queue()
    delay = grpcclient.InferInput("DELAY_US", [1], "INT64")
    delay.set_data_from_numpy(np.array([120_000_000], np.int64))
    with grpcclient.InferenceServerClient(endpoints.grpc_url) as client:
        future = client.async_infer("sleep_us", [delay],
                                    lambda result, error: got.put((result, error)))
        time.sleep(1.0)  # it reached the model
        future.cancel()
        result, error = got.get(timeout=TIMEOUT)
        assert result is None and status_of(error) == "StatusCode.CANCELLED"
    support.wait_until(lambda: failures() > before, timeout=30,
                       what="the call's request to be cancelled in the core")
