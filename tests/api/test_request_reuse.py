"""Core requests kept for reuse (csrc/bindings/request_pool.h): a request of
inputs only goes out in a core request an earlier one of the same model
left; what the reuse must never change is what the core answers."""

from __future__ import annotations

import asyncio
import os
import shutil
import threading
import time

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stats_when, stop_within
from tritonserver._c import triton_bindings
from tritonserver._model import send
from tritonserver._submit import RequestSpec

EXPLICIT = tritonserver.ModelControlMode.EXPLICIT
IDENTITY_CONFIG = ('backend: "identity"\nmax_batch_size: 0\n{extra}'
                   'input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]\n'
                   'output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]\n')


def kept(server: tritonserver.Server, at_least: int = 0, timeout: float = 5.0) -> int:
    """Requests the server keeps once nothing is in flight (the binding's
    deleting thread hands released requests back within 20 ms)."""
    handle = server._handle()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if handle.in_flight() == 0 and handle.kept_requests() >= at_least:
            break
        time.sleep(0.02)
    return handle.kept_requests()


def out(response: tritonserver.InferenceResponse, name: str = "OUTPUT0") -> np.ndarray:
    return np.from_dlpack(response.outputs[name]).copy()


def identity_repo(path, versions=(1,), extra: str = "") -> str:
    model = path / "ident"
    for version in versions:
        os.makedirs(model / str(version), exist_ok=True)
    (model / "config.pbtxt").write_text(IDENTITY_CONFIG.format(extra=extra))
    return str(path)


def test_reused_requests_carry_their_own_inputs(server):
    ident, add_sub = server.model("identity_fp32"), server.model("add_sub_fp32")
    for i in range(300):
        x = np.arange(1 + i % 5, dtype=np.float32) + i  # the shape changes too
        np.testing.assert_array_equal(out(next(ident.infer(inputs={"INPUT0": x}))), x)
        a, b = x * 2, x + 1
        inputs = {"INPUT0": a, "INPUT1": b} if i % 2 else {"INPUT1": b, "INPUT0": a}
        response = next(add_sub.infer(inputs=inputs))
        np.testing.assert_array_equal(out(response, "OUTPUT0"), a + b)
        np.testing.assert_array_equal(out(response, "OUTPUT1"), a - b)
    assert kept(server, at_least=2) >= 2  # one per model, at least
    # A request with more than inputs goes out in a new core request, and
    # its id still comes back.
    x = np.ones(3, np.float32)
    request = tritonserver.InferenceRequest(ident, inputs={"INPUT0": x}, request_id="own-id")
    assert next(ident.infer(request)).request_id == "own-id"
    assert next(ident.infer(inputs={"INPUT0": x})).request_id is None


def test_requested_outputs_follow_each_request(server):
    # A kept request's requested outputs are replaced when the next one asks
    # for others (or for none: every output).
    model = server.model("add_sub_fp32")
    a, b = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    for i in range(30):  # as the frontends send them
        asked = [["OUTPUT0"], ["OUTPUT1"], None, ["OUTPUT1", "OUTPUT0"]][i % 4]
        spec = RequestSpec(inputs={"INPUT0": a, "INPUT1": b}, requested_outputs=asked)
        response = next(send(model, spec, asynchronous=False))
        assert set(response.outputs) == set(asked or ["OUTPUT0", "OUTPUT1"])
        if "OUTPUT0" in response.outputs:
            np.testing.assert_array_equal(out(response, "OUTPUT0"), a + b)
    assert kept(server, at_least=1) >= 1


def sent(server, model: str, name: str, datatype: int, shape: list, data: np.ndarray,
         byte_size: int):
    """A binding request of one input (its byte size as given), sent."""
    request = triton_bindings.InferenceRequest(server._handle(), model, -1)
    request.add_input(name, datatype, shape, data.ctypes.data, byte_size, 0, 0, data)
    request.send()
    return request


def test_reused_inputs_are_checked_as_new_ones(server):
    # The core checks an input's data against its shape when the input is
    # added; a kept input takes new data only where that check would answer
    # the same (same shape and byte size, not BYTES).
    fp32, bytes_ = int(tritonserver.DataType.FP32), int(tritonserver.DataType.BYTES)
    ident = server.model("identity_fp32")
    x = np.arange(4, dtype=np.float32)
    for _ in range(3):
        request = sent(server, "identity_fp32", "INPUT0", fp32, [4], x, x.nbytes)
        assert request.pop_response(ident, None).error is None
    assert kept(server, at_least=1) >= 1
    with pytest.raises(tritonserver.InvalidArgumentError, match="byte size mismatch"):
        sent(server, "identity_fp32", "INPUT0", fp32, [4], x, x.nbytes - 4)
    # BYTES, shape [2]: two elements in 12 bytes, then 12 bytes of one.
    model = server.model("identity_bytes")

    def serialized(*items: bytes) -> np.ndarray:
        raw = b"".join(np.uint32(len(item)).tobytes() + item for item in items)
        return np.frombuffer(raw, np.uint8).copy()

    good, bad = serialized(b"abc", b"d"), serialized(b"abcdefgh")
    assert good.nbytes == bad.nbytes
    for _ in range(3):
        request = sent(server, "identity_bytes", "INPUT0", bytes_, [2], good, good.nbytes)
        assert request.pop_response(model, None).error is None
    assert kept(server, at_least=2) >= 2
    with pytest.raises(tritonserver.InvalidArgumentError, match="expected 2 string elements"):
        sent(server, "identity_bytes", "INPUT0", bytes_, [2], bad, bad.nbytes)
    np.testing.assert_array_equal(out(next(ident.infer(inputs={"INPUT0": x}))), x)


def test_reuse_under_threads_and_asyncio(example_repo):
    server = start_server(model_repository=example_repo)
    try:
        reuse_under_threads_and_asyncio(server)
    finally:
        stop_within(server)


def reuse_under_threads_and_asyncio(server):
    ident = server.model("identity_fp32")
    errors = []

    def loop(seed):
        try:
            for i in range(200):
                x = np.full(4, seed * 1000 + i, np.float32)
                np.testing.assert_array_equal(out(next(ident.infer(inputs={"INPUT0": x}))), x)
        except Exception as e:  # reported below, with the thread's seed
            errors.append((seed, e))

    threads = [threading.Thread(target=loop, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors

    async def many():
        async def one(i):
            x = np.full(2, i, np.float32)
            return [(x, out(r)) async for r in ident.async_infer(inputs={"INPUT0": x})]
        for _ in range(3):  # more in flight than a model keeps
            for results in await asyncio.gather(*(one(i) for i in range(100))):
                for x, y in results:
                    np.testing.assert_array_equal(x, y)

    asyncio.run(many())
    assert 2 <= kept(server, at_least=2) <= 64  # one model's, at most 64


def test_a_reload_is_served_by_the_new_version(tmp_path):
    repo = identity_repo(tmp_path / "repo")
    s = start_server(model_repository=repo, model_control_mode=EXPLICIT)
    try:
        s.load("ident")
        model, x = s.model("ident"), np.ones(2, np.float32)
        for _ in range(5):
            next(model.infer(inputs={"INPUT0": x}))
        assert kept(s, at_least=1) >= 1
        newer = os.path.join(repo, "ident", "2")
        os.makedirs(newer)
        # The core reloads a model only when something in its folder is
        # dated later than at the last load; a folder made a millisecond
        # after that load can carry the same time (6 in 20 such reloads here
        # found nothing new). Dated a second later, it is new.
        later = time.time() + 1
        os.utime(newer, (later, later))
        s.load("ident")  # the newest version is served from now on
        assert kept(s) == 0
        for _ in range(7):
            next(model.infer(inputs={"INPUT0": x}))
        stats = stats_when(s.model("ident", 2),
                           lambda st: st["inference_stats"]["success"]["count"] >= 7)
        assert stats["inference_stats"]["success"]["count"] == 7  # none went to version 1
        assert not s.model("ident", 1).ready()
    finally:
        stop_within(s)


def test_kept_requests_do_not_hold_an_unloaded_model(tmp_path):
    s = start_server(model_repository=identity_repo(tmp_path / "repo"),
                     model_control_mode=EXPLICIT)
    try:
        s.load("ident")
        model = s.model("ident")
        for i in range(10):
            next(model.infer(inputs={"INPUT0": np.full(3, i, np.float32)}))
        assert kept(s, at_least=1) >= 1
        s.unload("ident", wait_until_unloaded=True, timeout=10)
        assert kept(s) == 0
        assert not model.ready()
        with pytest.raises(tritonserver.TritonError):
            next(model.infer(inputs={"INPUT0": np.ones(3, np.float32)}))
        s.load("ident")  # and back: new core requests for the new load
        x = np.arange(3, dtype=np.float32)
        np.testing.assert_array_equal(out(next(model.infer(inputs={"INPUT0": x}))), x)
    finally:
        t0 = time.monotonic()
        stop_within(s)
    assert time.monotonic() - t0 < 5  # no kept request made the stop wait


def test_models_whose_scheduler_marks_requests_keep_none(tmp_path, example_repo):
    # The response cache keeps a request's first cache key, an ensemble adds
    # a release callback per inference: neither model's requests are kept,
    # and each answer is its own request's.
    repo = tmp_path / "repo"
    identity_repo(repo, extra="response_cache { enable: true }\n")
    shutil.copytree(os.path.join(example_repo, "identity_fp32"), repo / "identity_fp32")
    os.makedirs(repo / "chain" / "1")
    (repo / "chain" / "config.pbtxt").write_text(
        'platform: "ensemble"\nmax_batch_size: 0\n'
        'input [ { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        'output [ { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        'ensemble_scheduling { step [ { model_name: "identity_fp32" model_version: -1 '
        'input_map { key: "INPUT0" value: "IN" } output_map { key: "OUTPUT0" value: "OUT" } } ] }\n')
    s = start_server(model_repository=str(repo), cache_config={"local": {"size": 1 << 20}})
    try:
        cached, chain = s.model("ident"), s.model("chain")
        for i in range(20):
            x = np.full(4, i % 3, np.float32)  # repeats: hits and misses
            np.testing.assert_array_equal(out(next(cached.infer(inputs={"INPUT0": x}))), x)
            y = np.full(3, i, np.float32)
            np.testing.assert_array_equal(out(next(chain.infer(inputs={"IN": y})), "OUT"), y)
        stats = cached.statistics()["model_stats"][0]["inference_stats"]
        assert stats["cache_hit"]["count"] == 17 and stats["cache_miss"]["count"] == 3
        assert kept(s) == 0
    finally:
        stop_within(s)


def test_a_polling_server_keeps_none(example_repo):
    s = start_server(model_repository=example_repo,
                     model_control_mode=tritonserver.ModelControlMode.POLL)
    try:
        model = s.model("identity_fp32")
        for _ in range(5):
            next(model.infer(inputs={"INPUT0": np.ones(2, np.float32)}))
        assert kept(s) == 0
    finally:
        stop_within(s)
