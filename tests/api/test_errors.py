"""Each exception class, reached through a real bad input on the real core.

After every failure the server must still be live and answer a good request.
"""

from __future__ import annotations

import numpy as np
import pytest

import tritonserver
from conftest import BROKEN_MODELS as BROKEN


def assert_still_serving(server):
    # Live and answering. (Not necessarily ready: under strict readiness a
    # model that failed to load makes the server report not-ready.)
    assert server.live()
    out = next(server.model("identity_fp32").infer(inputs={"INPUT0": np.arange(3, dtype=np.float32)}))
    assert np.from_dlpack(out.outputs["OUTPUT0"]).tolist() == [0.0, 1.0, 2.0]


BAD_REQUESTS = [
    ("unknown model", "no_such_model", {"INPUT0": np.zeros(2, np.float32)}, tritonserver.NotFoundError),
    ("wrong input name", "identity_fp32", {"INPUT9": np.zeros(2, np.float32)}, tritonserver.InvalidArgumentError),
    ("wrong dtype", "identity_fp32", {"INPUT0": np.zeros(2, np.int32)}, tritonserver.InvalidArgumentError),
    ("wrong shape", "identity_fp32", {"INPUT0": np.zeros((2, 2), np.float32)}, tritonserver.InvalidArgumentError),
    ("missing input", "add_sub_fp32", {"INPUT0": np.zeros(2, np.float32)}, tritonserver.InvalidArgumentError),
    ("no inputs", "identity_fp32", {}, tritonserver.InvalidArgumentError),
    ("mismatched shapes in backend", "add_sub_fp32",
     {"INPUT0": np.zeros(2, np.float32), "INPUT1": np.zeros(3, np.float32)}, tritonserver.InvalidArgumentError),
    ("bytes given to fp32", "identity_fp32", {"INPUT0": np.array([b"x"], dtype=object)},
     tritonserver.InvalidArgumentError),
]


@pytest.mark.parametrize("what,model,inputs,error", BAD_REQUESTS, ids=[r[0] for r in BAD_REQUESTS])
def test_bad_request_raises_its_class(server, what, model, inputs, error):
    with pytest.raises(error) as info:
        list(server.model(model).infer(inputs=inputs))
    assert str(info.value)  # a message, not an empty error
    assert isinstance(info.value, tritonserver.TritonError)
    assert_still_serving(server)


def test_errors_also_derive_from_builtins():
    assert issubclass(tritonserver.NotFoundError, LookupError)
    assert issubclass(tritonserver.InvalidArgumentError, ValueError)
    assert issubclass(tritonserver.UnsupportedError, NotImplementedError)
    for cls in (tritonserver.NotFoundError, tritonserver.UnknownError, tritonserver.InternalError,
                tritonserver.InvalidArgumentError, tritonserver.UnavailableError,
                tritonserver.AlreadyExistsError, tritonserver.UnsupportedError,
                tritonserver.CancelledError):
        assert issubclass(cls, tritonserver.TritonError)


def test_raise_on_error_false_returns_the_error(server):
    # A request the core refuses before running raises at send time...
    with pytest.raises(tritonserver.InvalidArgumentError):
        server.model("identity_fp32").infer(
            inputs={"INPUT0": np.zeros((2, 2), np.float32)}, raise_on_error=False)
    # ...a backend-side failure comes back as a response carrying the error.
    responses = list(server.model("add_sub_fp32").infer(
        inputs={"INPUT0": np.zeros(2, np.float32), "INPUT1": np.zeros(3, np.float32)},
        raise_on_error=False))
    assert len(responses) == 1
    assert isinstance(responses[0].error, tritonserver.InvalidArgumentError)
    assert responses[0].outputs == {}
    assert_still_serving(server)


def test_bad_request_arguments(server):
    model = server.model("identity_fp32")
    good = {"INPUT0": np.zeros(2, np.float32)}
    for kwargs in ({"priority": -1}, {"timeout": "soon"}, {"correlation_id": -5},
                   {"parameters": {"k": object()}}, {"parameters": {1: "v"}},
                   {"inputs": {"INPUT0": [object()]}}, {"request_id": 7}):
        merged = {"inputs": good, **kwargs}
        with pytest.raises(tritonserver.InvalidArgumentError):
            list(model.infer(**merged))
    with pytest.raises(tritonserver.InvalidArgumentError):
        model.infer(model.create_request(inputs=good), inputs=good)
    assert_still_serving(server)


# The core reads names as C strings, which end at a NUL: "INPUT0\0x" would
# reach it as "INPUT0", and a model name in a URL as another model's.
NUL_TEXT = {
    "input name, array (the fast path)": lambda m: list(m.infer(inputs={"INPUT0\0x": np.zeros(2, np.float32)})),
    "input name, request object": lambda m: list(m.infer(m.create_request(inputs={"INPUT0\0": np.zeros(2, np.float32)}))),
    "input name, list": lambda m: list(m.infer(inputs={"INPUT0\0": [1.0, 2.0]})),
    "parameter name": lambda m: list(m.infer(inputs={"INPUT0": np.zeros(2, np.float32)}, parameters={"k\0": 1})),
    "parameter value": lambda m: list(m.infer(inputs={"INPUT0": np.zeros(2, np.float32)}, parameters={"k": "v\0w"})),
    "request id": lambda m: list(m.infer(inputs={"INPUT0": np.zeros(2, np.float32)}, request_id="a\0b")),
    "correlation id": lambda m: list(m.infer(inputs={"INPUT0": np.zeros(2, np.float32)}, correlation_id="a\0b")),
}


@pytest.mark.parametrize("what", list(NUL_TEXT))
def test_text_holding_a_nul_is_refused_not_cut(server, what):
    with pytest.raises(tritonserver.InvalidArgumentError, match="holds a NUL character"):
        NUL_TEXT[what](server.model("identity_fp32"))
    assert_still_serving(server)


# A lone surrogate (as os.fsdecode makes of bytes that are not UTF-8) has
# no UTF-8 form, and the binding hands the core text as UTF-8.
SURROGATE = "in\udc80"
SURROGATE_TEXT = {
    "input name, array (the fast path)": lambda s, m: list(m.infer(inputs={SURROGATE: np.zeros(2, np.float32)})),
    "input name, after an array": lambda s, m: list(m.infer(inputs={"INPUT0": np.zeros(2, np.float32), SURROGATE: np.zeros(2, np.float32)})),
    "input name, request object": lambda s, m: list(m.infer(m.create_request(inputs={SURROGATE: np.zeros(2, np.float32)}))),
    "input name, list": lambda s, m: list(m.infer(inputs={SURROGATE: [1.0, 2.0]})),
    "request id": lambda s, m: list(m.infer(inputs={"INPUT0": np.zeros(2, np.float32)}, request_id=SURROGATE)),
    "correlation id": lambda s, m: list(m.infer(inputs={"INPUT0": np.zeros(2, np.float32)}, correlation_id=SURROGATE)),
    "model name": lambda s, m: s.model(SURROGATE),
}


@pytest.mark.parametrize("what", list(SURROGATE_TEXT))
def test_text_with_no_utf8_form_is_refused(server, what):
    with pytest.raises(tritonserver.InvalidArgumentError, match="is not valid UTF-8"):
        SURROGATE_TEXT[what](server, server.model("identity_fp32"))
    assert_still_serving(server)


def test_names_holding_a_nul_are_refused_by_the_server_calls(explicit_server, tmp_path):
    s = explicit_server
    s.load("identity_fp32")
    cut = "identity_fp32\0x"  # the core would read "identity_fp32"
    for call in (lambda: s.model(cut).metadata(), lambda: s.model(cut).ready(),
                 lambda: list(s.model(cut).infer(inputs={"INPUT0": np.zeros(2, np.float32)})),
                 lambda: s.load(cut), lambda: s.unload(cut),
                 lambda: s.load("identity_fp32", parameters={"config": "{}\0"}),
                 lambda: s.register_model_repository(str(tmp_path) + "\0x")):
        with pytest.raises(tritonserver.InvalidArgumentError, match="holds a NUL character"):
            call()
    assert s.model("identity_fp32").ready()  # the unload above did not reach it
    with pytest.raises(tritonserver.InvalidArgumentError, match="holds a NUL character"):
        tritonserver.Server(model_repository=str(tmp_path) + "\0x").start()


def test_unsupported_dlpack_of_bytes():
    t = tritonserver.Tensor.from_bytes_array([b"a"])
    with pytest.raises(tritonserver.UnsupportedError):
        t.__dlpack__()


def test_broken_config_fails_to_load_and_server_lives(explicit_server):
    with pytest.raises(tritonserver.TritonError) as info:
        explicit_server.load("broken_config")
    assert "broken_config" in str(info.value) or "TYPE_NOT_A_TYPE" in str(info.value)
    explicit_server.load("identity_fp32")
    assert_still_serving(explicit_server)


def test_backend_refusing_a_model_fails_the_load(explicit_server):
    with pytest.raises(tritonserver.TritonError, match="decoupled"):
        explicit_server.load("repeat_not_decoupled")
    assert_still_serving_after_load(explicit_server)


def assert_still_serving_after_load(server):
    server.load("identity_fp32")
    assert_still_serving(server)


def test_load_unknown_model_is_an_error(explicit_server):
    with pytest.raises(tritonserver.TritonError):
        explicit_server.load("not_in_the_repository")
    assert explicit_server.live()


def test_infer_on_unloaded_model_is_unavailable(explicit_server):
    explicit_server.load("identity_fp32")
    explicit_server.unload("identity_fp32", wait_until_unloaded=True, timeout=30)
    with pytest.raises((tritonserver.UnavailableError, tritonserver.NotFoundError)):
        list(explicit_server.model("identity_fp32").infer(inputs={"INPUT0": np.zeros(1, np.float32)}))
    explicit_server.load("identity_fp32")
    assert_still_serving(explicit_server)


def test_register_same_repository_twice_already_exists(explicit_server, tmp_path):
    repo = tmp_path / "extra"
    repo.mkdir()
    explicit_server.register_model_repository(str(repo))
    with pytest.raises(tritonserver.AlreadyExistsError):
        explicit_server.register_model_repository(str(repo))
    explicit_server.unregister_model_repository(str(repo))
    assert explicit_server.live()


@pytest.mark.parametrize("call", [
    lambda s: s.ready(), lambda s: s.live(), lambda s: s.metadata(), lambda s: s.models(),
    lambda s: s.model("identity_fp32"), lambda s: s.load("identity_fp32"),
    lambda s: s.metrics(), lambda s: s._ptr(),
], ids=["ready", "live", "metadata", "models", "model", "load", "metrics", "_ptr"])
def test_methods_on_an_unstarted_server_raise(example_repo, call):
    s = tritonserver.Server(model_repository=example_repo)
    with pytest.raises(tritonserver.InvalidArgumentError, match="server is not started"):
        call(s)


def test_wait_until_ready_times_out(tmp_path, example_repo):
    # Under strict readiness a model that failed to load keeps the server
    # not ready; with exit_on_error=False the server still starts.
    import shutil

    shutil.copytree(BROKEN, tmp_path / "repo")
    s = tritonserver.Server(model_repository=str(tmp_path / "repo"), exit_on_error=False,
                            strict_readiness=True, exit_timeout=5)
    with pytest.raises(tritonserver.UnavailableError):
        s.start(wait_until_ready=True, timeout=0.5, polling_interval=0.05)
    assert s.live() and not s.ready()
    s.stop()


def test_kept_exceptions_do_not_hold_models(example_repo):
    # Failed requests whose exceptions (and tracebacks) the program keeps,
    # and iterators it never finishes, must not keep a model loaded: stop()
    # returns well within the exit timeout instead of waiting it out.
    import time

    from conftest import start_server, stop_within

    s = start_server(model_repository=example_repo, exit_timeout=20)
    kept = []
    for inputs in ({"INPUT9": np.zeros(2, np.float32)}, {"INPUT0": np.zeros(2, np.int32)}):
        try:
            list(s.model("identity_fp32").infer(inputs=inputs))
        except tritonserver.TritonError as e:
            kept.append(e)
    kept.append(s.model("repeat_int32").infer(inputs={"IN": np.arange(5, dtype=np.int32)}))
    kept.append(next(s.model("identity_fp32").infer(inputs={"INPUT0": np.ones(2, np.float32)})))
    started = time.monotonic()
    stop_within(s)
    assert time.monotonic() - started < 10
    assert len(kept) == 4
