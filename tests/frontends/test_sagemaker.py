"""The SageMaker frontend (Triton's SageMaker service, ``src/sagemaker_server.cc``)
on a real server and real models, with tritonclient's request bodies:
/ping in both modes, /invocations (JSON, SageMaker's binary Content-Type
and its errors, raw binary, decoupled refusal, generate and
generate_stream), the multi-model endpoints on real archives laid out as
SageMaker unpacks them (``<root>/<hash>/model[/<model folders>]``), restricted
APIs, OpenTelemetry context propagation, and ``serve --allow-sagemaker``.

The multi-model url must lie under SageMaker's ``/opt/ml/models``, as
Triton's pattern requires: these tests give the frontend a folder of their
own as ``models_root`` (the one thing that differs from production; the
pattern and the rest of the path are checked the same), and one test
checks the default root's refusal text.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import textwrap
from typing import Any, Iterator, Optional

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within
from frontends import support
from frontends.serve_process import Serve

import tritonclient.http as httpclient  # noqa: E402

from tritonserver.frontends import SageMaker  # noqa: E402
from tritonserver.frontends.sagemaker import models as sagemaker_models  # noqa: E402
from tritonserver.frontends.sagemaker.wire import BINARY_MIME  # noqa: E402

EXAMPLES = tritonserver.example_model_repository()
JSON = {"Content-Type": "application/json"}
DECOUPLED = "HTTP end point doesn't support models with decoupled transaction policy"
TARGET = "X-Amzn-SageMaker-Target-Model"


# ---- Fixtures and helpers --------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[tritonserver.Server]:
    s = start_server(model_repository=[EXAMPLES],
                     model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                     startup_models=["add_sub_int32", "identity_fp32", "repeat_int32",
                                     "identity_bytes"])
    yield s
    stop_within(s)


def _usable_folder(base: Any) -> Iterator[str]:
    """A new folder in `base`, or in /tmp where `base` lies under /dev
    (TMPDIR on /dev/shm), /proc or /sys: SageMaker's service refuses urls
    there, as Triton's does; removed afterwards."""
    if check_not_system_folder(str(base)):
        yield str(base)
        return
    folder = tempfile.mkdtemp(prefix="sagemaker-tests-", dir="/tmp")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def check_not_system_folder(path: str) -> bool:
    try:
        sagemaker_models.check_not_system(path)
        return True
    except sagemaker_models.SystemFolderError:
        return False


@pytest.fixture(scope="module")
def root(tmp_path_factory: Any) -> Iterator[str]:
    """The tests' stand-in for /opt/ml/models."""
    for base in _usable_folder(tmp_path_factory.mktemp("sagemaker")):
        folder = os.path.join(base, "models")
        os.mkdir(folder)
        yield folder


@pytest.fixture
def outside(tmp_path: Any) -> Iterator[str]:
    """A folder outside the models root (and outside /dev, /proc, /sys)."""
    yield from _usable_folder(tmp_path)


@pytest.fixture(scope="module")
def sagemaker(server: tritonserver.Server, root: str) -> Iterator[SageMaker]:
    with SageMaker(server, SageMaker.Options(port=0, default_model_name="add_sub_int32",
                                             models_root=root)) as frontend:
        yield frontend


@contextlib.contextmanager
def frontend(server: tritonserver.Server, **options: Any) -> Iterator[SageMaker]:
    with SageMaker(server, SageMaker.Options(port=0, **options)) as f:
        yield f


def call(f: SageMaker, method: str, path: str, body: bytes = b"",
         headers: Optional[dict[str, str]] = None) -> tuple[int, dict[str, str], bytes]:
    return support.request(f.port, method, path, body, headers)


def add_sub_body(binary: bool = False, outputs: bool = True) -> tuple[bytes, Optional[int]]:
    """tritonclient's body for add_sub_int32 (INPUT0 = 0..7, INPUT1 = 1)."""
    inputs = [httpclient.InferInput("INPUT0", [8], "INT32"),
              httpclient.InferInput("INPUT1", [8], "INT32")]
    inputs[0].set_data_from_numpy(np.arange(8, dtype=np.int32), binary_data=binary)
    inputs[1].set_data_from_numpy(np.ones(8, dtype=np.int32), binary_data=binary)
    requested = [httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary),
                 httpclient.InferRequestedOutput("OUTPUT1", binary_data=binary)]
    return httpclient.InferenceServerClient.generate_request_body(
        inputs, outputs=requested if outputs else None)


def binary_type(size: int) -> str:
    return f"{BINARY_MIME}{size}"


def check_add_sub_json(status: int, headers: dict[str, str], body: bytes,
                       model: str = "add_sub_int32") -> None:
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    document = json.loads(body)
    document.pop("parameters", None)  # an ensemble's response has the sequence's
    assert document == {
        "model_name": model, "model_version": "1",
        "outputs": [{"name": "OUTPUT0", "datatype": "INT32", "shape": [8],
                     "data": list(range(1, 9))},
                    {"name": "OUTPUT1", "datatype": "INT32", "shape": [8],
                     "data": list(range(-1, 7))}]}


def check_add_sub_binary(status: int, headers: dict[str, str], body: bytes) -> None:
    assert status == 200, body
    content_type = headers["content-type"]
    assert content_type.startswith(BINARY_MIME)
    assert "inference-header-content-length" not in headers
    result = httpclient.InferenceServerClient.parse_response_body(
        body, header_length=int(content_type[len(BINARY_MIME):]))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), np.arange(1, 9))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), np.arange(-1, 7))


def archive(root: str, model_hash: str, models: dict[str, str], at_url: bool = False,
            names: Optional[dict[str, str]] = None) -> str:
    """A model archive as SageMaker unpacks it: ``<root>/<hash>/model``
    holding copies of example models (folder -> example), or, with
    ``at_url``, the one model's files themselves. ``names`` rewrites the
    ``name:`` of a copied config. Returns the url."""
    url = os.path.join(root, model_hash, "model")
    shutil.rmtree(os.path.join(root, model_hash), ignore_errors=True)
    for folder, example in models.items():
        target = url if at_url else os.path.join(url, folder)
        shutil.copytree(os.path.join(EXAMPLES, example), target)
        if names and folder in names:
            config = os.path.join(target, "config.pbtxt")
            with open(config, encoding="utf-8") as f:
                text = f.read().replace(f'name: "{example}"', f'name: "{names[folder]}"')
            with open(config, "w", encoding="utf-8") as f:
                f.write(text)
    return url


def load(f: SageMaker, model_hash: str, url: str,
         target: Optional[str] = None) -> tuple[int, dict[str, str], bytes]:
    headers = dict(JSON, **({TARGET: target} if target else {}))
    return call(f, "POST", "/models", json.dumps({"model_name": model_hash, "url": url}).encode(),
                headers)


def model_state(server: tritonserver.Server, name: str) -> Optional[str]:
    states = [m.state for (n, _), m in server.models().items() if n == name]
    return states[0] if states else None


# ---- /ping -----------------------------------------------------------------------------------


def test_ping_answers_readiness_with_an_empty_body(sagemaker: SageMaker):
    status, headers, body = call(sagemaker, "GET", "/ping")
    assert (status, body) == (200, b"")
    assert sagemaker.url == f"http://127.0.0.1:{sagemaker.port}"


def test_ping_modes_on_a_server_that_is_live_but_not_ready(tmp_path: Any, monkeypatch: Any):
    """A model that fails to load at start leaves the server live but not
    ready: ping mode "ready" (the default) answers an empty 400, "live" 200;
    the mode comes from SAGEMAKER_TRITON_PING_MODE when not given."""
    shutil.copytree(os.path.join(EXAMPLES, "identity_fp32"), tmp_path / "identity_fp32")
    (tmp_path / "broken" / "1").mkdir(parents=True)
    (tmp_path / "broken" / "config.pbtxt").write_text('backend: "no_such_backend"\n')
    s = tritonserver.Server(model_repository=str(tmp_path), log_error=False, exit_timeout=10,
                            exit_on_error=False).start(wait_until_ready=False)
    try:
        assert s.live() and not s.ready()
        with frontend(s) as f:
            assert call(f, "GET", "/ping")[::2] == (400, b"")
        with frontend(s, ping_mode="live") as f:
            assert call(f, "GET", "/ping")[::2] == (200, b"")
        monkeypatch.setenv("SAGEMAKER_TRITON_PING_MODE", "live")
        with frontend(s) as f:
            assert call(f, "GET", "/ping")[::2] == (200, b"")
        monkeypatch.setenv("SAGEMAKER_TRITON_PING_MODE", "ready")
        with frontend(s) as f:
            assert call(f, "GET", "/ping")[::2] == (400, b"")
    finally:
        stop_within(s)


def test_wrong_methods_and_other_paths(sagemaker: SageMaker):
    status, _, body = call(sagemaker, "POST", "/ping")
    assert status == 405 and json.loads(body) == {"error": "Method Not Allowed"}
    status, _, body = call(sagemaker, "GET", "/invocations")
    assert status == 405 and json.loads(body) == {"error": "Method Not Allowed"}
    for method, path in (("GET", "/"), ("GET", "/v2/health/ready"), ("GET", "/pingx"),
                         ("PUT", "/models"), ("PATCH", "/models/x"), ("GET", "/models/a/b/c"),
                         ("POST", "/invocations/x")):
        assert call(sagemaker, method, path)[::2] == (400, b""), (method, path)


# ---- /invocations ----------------------------------------------------------------------------


def test_invocations_json(sagemaker: SageMaker):
    body, size = add_sub_body()
    assert size is None
    check_add_sub_json(*call(sagemaker, "POST", "/invocations", body, JSON))
    # Without outputs named, tritonclient asks for binary ones (binary_data_output).
    check_add_sub_binary(*call(sagemaker, "POST", "/invocations",
                               add_sub_body(outputs=False)[0], JSON))


def test_invocations_binary_content_type(sagemaker: SageMaker):
    body, size = add_sub_body(binary=True)
    assert size is not None and size < len(body)
    check_add_sub_binary(*call(sagemaker, "POST", "/invocations", body,
                               {"Content-Type": binary_type(size)}))
    # Binary inputs, JSON outputs: the response is plain JSON.
    inputs = [httpclient.InferInput(n, [8], "INT32") for n in ("INPUT0", "INPUT1")]
    inputs[0].set_data_from_numpy(np.arange(8, dtype=np.int32), binary_data=True)
    inputs[1].set_data_from_numpy(np.ones(8, dtype=np.int32), binary_data=True)
    outputs = [httpclient.InferRequestedOutput(n, binary_data=False)
               for n in ("OUTPUT0", "OUTPUT1")]
    body, size = httpclient.InferenceServerClient.generate_request_body(inputs, outputs=outputs)
    check_add_sub_json(*call(sagemaker, "POST", "/invocations", body,
                             {"Content-Type": binary_type(size)}))
    # Triton's Inference-Header-Content-Length means nothing here: the body is all JSON.
    status, _, data = call(sagemaker, "POST", "/invocations", body,
                           {"Content-Type": "application/json",
                            "Inference-Header-Content-Length": str(size)})
    assert status == 400 and "parse the request JSON" in support.json_error(data)


@pytest.mark.parametrize("value, message", [
    ("abc", "Unable to parse inference header size, got: abc"),
    ("99999999999", "Unable to parse inference header size, value is out of range, got: "
                    "99999999999"),
    ("-1", "inference header size should be in range (0, {size}), got: -1"),
    ("{over}", "inference header size should be in range (0, {size}), got: {over}"),
])
def test_bad_json_header_sizes(sagemaker: SageMaker, value: str, message: str):
    body, _ = add_sub_body(binary=True)
    value = value.format(over=len(body) + 1)
    status, headers, data = call(sagemaker, "POST", "/invocations", body,
                                 {"Content-Type": binary_type(0)[:-1] + value})
    assert status == 400 and headers["content-type"] == "application/json"
    assert support.json_error(data) == message.format(size=len(body), over=len(body) + 1)


def test_the_binary_type_must_start_the_content_type(sagemaker: SageMaker):
    body, size = add_sub_body(binary=True)
    content_type = f"text/plain; {binary_type(size)}"
    status, _, data = call(sagemaker, "POST", "/invocations", body,
                           {"Content-Type": content_type})
    assert status == 400 and support.json_error(data) == (
        f"expect MIME type for binary data starts with '{BINARY_MIME}', got: {content_type}")


def test_json_header_size_0_is_the_only_inputs_bytes(server: tritonserver.Server):
    x = np.linspace(0, 1, 6, dtype=np.float32)
    with frontend(server, default_model_name="identity_fp32") as f:
        status, headers, body = call(f, "POST", "/invocations", x.tobytes(),
                                     {"Content-Type": binary_type(0)})
        assert status == 200, body
        result = httpclient.InferenceServerClient.parse_response_body(
            body, header_length=int(headers["content-type"][len(BINARY_MIME):]))
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), x)


def test_invocations_errors_keep_tritons_http_statuses(server: tritonserver.Server):
    """/invocations is Triton's HTTP infer handler: its statuses are per
    error code (the multi-model invoke's are 400 / 507)."""
    with frontend(server, default_model_name="repeat_int32") as f:
        body = json.dumps({"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1],
                                       "data": [1]}]}).encode()
        status, _, data = call(f, "POST", "/invocations", body, JSON)
        assert status == 501 and support.json_error(data) == DECOUPLED
    with frontend(server) as f:  # no model named: Triton's placeholder name
        assert f.settings.default_model_name == "unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"
        status, _, data = call(f, "POST", "/invocations", add_sub_body()[0], JSON)
        assert status in (400, 404) and \
            "unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME" in support.json_error(data)


def test_the_default_model_comes_from_the_environment(server: tritonserver.Server,
                                                      monkeypatch: Any):
    monkeypatch.setenv("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME", "add_sub_int32")
    with frontend(server) as f:
        check_add_sub_json(*call(f, "POST", "/invocations", add_sub_body()[0], JSON))


def test_generate_and_generate_stream_inference_types(server: tritonserver.Server,
                                                      monkeypatch: Any):
    with frontend(server, default_model_name="identity_bytes", inference_type="generate") as f:
        status, headers, body = call(f, "POST", "/invocations",
                                     json.dumps({"id": "7", "INPUT0": "hi"}).encode(), JSON)
        assert status == 200 and headers["content-type"] == "application/json", body
        assert json.loads(body) == {"id": "7", "model_name": "identity_bytes",
                                    "model_version": "1", "OUTPUT0": "hi"}
    monkeypatch.setenv("SAGEMAKER_TRITON_INFERENCE_TYPE", "generate_stream")
    with frontend(server, default_model_name="repeat_int32") as f:
        status, headers, body = call(f, "POST", "/invocations", b'{"IN": [3, 1, 4]}', JSON)
        assert status == 200 and headers["content-type"].startswith("text/event-stream")
        assert [e["OUT"] for e in support.sse_events(body)] == [3, 1, 4]


def test_an_unknown_inference_type_is_refused_per_request(server: tritonserver.Server):
    with frontend(server, default_model_name="add_sub_int32", inference_type="bogus") as f:
        status, _, body = call(f, "POST", "/invocations", add_sub_body()[0], JSON)
        assert status == 400 and support.json_error(body) == (
            "Server has invalid inference type 'bogus'. Must be one of: infer, generate, "
            "generate_stream.")
        assert call(f, "GET", "/ping")[0] == 200


# ---- Multi-model endpoints -------------------------------------------------------------------


def test_load_list_get_invoke_unload(server: tritonserver.Server, sagemaker: SageMaker,
                                     root: str):
    """The QA's flow (qa/L0_sagemaker/sagemaker_multi_model_test.py): a
    model whose files are the url itself, registered as <root>/<hash> with
    model/ mapped to the model's name."""
    url = archive(root, "123456789abcdefghi", {"model": "add_sub_int32"}, at_url=True,
                  names={"model": "sm_mme_model_1"})
    status, _, body = load(sagemaker, "sm_mme_model_1", url)
    assert (status, body) == (200, b"")
    assert model_state(server, "sm_mme_model_1") == "READY"
    # The same archive again: the core's conflict, 409.
    status, _, body = load(sagemaker, "sm_mme_model_1", url)
    assert status == 409 and support.json_error(body) == (
        f"model repository '{os.path.dirname(url)}' has already been registered")
    expected = {"modelName": "sm_mme_model_1", "modelUrl": os.path.dirname(url)}
    status, _, body = call(sagemaker, "GET", "/models")
    assert status == 200 and json.loads(body) == {"models": [expected]}
    status, _, body = call(sagemaker, "GET", "/models/sm_mme_model_1")
    assert status == 200 and json.loads(body) == expected
    body, _ = add_sub_body()
    check_add_sub_json(*call(sagemaker, "POST", "/models/sm_mme_model_1/invoke", body, JSON),
                       model="sm_mme_model_1")
    body, size = add_sub_body(binary=True)
    check_add_sub_binary(*call(sagemaker, "POST", "/models/sm_mme_model_1/invoke", body,
                               {"Content-Type": binary_type(size or 0)}))
    status, _, body = call(sagemaker, "DELETE", "/models/sm_mme_model_1")
    assert (status, body) == (200, b"")
    assert model_state(server, "sm_mme_model_1") is None  # its repository went with it
    for method, path in (("GET", "/models/sm_mme_model_1"),
                         ("POST", "/models/sm_mme_model_1/invoke"),
                         ("DELETE", "/models/sm_mme_model_1"),
                         ("DELETE", "/models/sm_non_loaded_model")):
        assert call(sagemaker, method, path, b"{}", JSON)[::2] == (404, b""), (method, path)
    assert json.loads(call(sagemaker, "GET", "/models")[2]) == {"models": []}
    # Unloaded and unregistered: the same archive loads again.
    assert load(sagemaker, "sm_mme_model_1", url)[0] == 200
    assert call(sagemaker, "DELETE", "/models/sm_mme_model_1")[0] == 200


def test_an_archive_of_model_folders_loads_its_ensemble(server: tritonserver.Server,
                                                        sagemaker: SageMaker, root: str):
    """Several folders: the one whose config is an ensemble is the model,
    named by X-Amzn-SageMaker-Target-Model; its steps load from the same
    archive, and the unload takes them along."""
    url = archive(root, "123456789ensemble", {"add_sub_step": "add_sub_int32"},
                  names={"add_sub_step": "add_sub_step"})
    os.makedirs(os.path.join(url, "fan_add_sub", "1"))
    with open(os.path.join(url, "fan_add_sub", "config.pbtxt"), "w") as f:
        f.write(textwrap.dedent('''\
            platform: "ensemble"
            max_batch_size: 0
            input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ -1 ] },
                    { name: "INPUT1" data_type: TYPE_INT32 dims: [ -1 ] } ]
            output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ -1 ] },
                     { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ -1 ] } ]
            ensemble_scheduling { step [ {
              model_name: "add_sub_step" model_version: -1
              input_map { key: "INPUT0" value: "INPUT0" }
              input_map { key: "INPUT1" value: "INPUT1" }
              output_map { key: "OUTPUT0" value: "OUTPUT0" }
              output_map { key: "OUTPUT1" value: "OUTPUT1" } } ] }
            '''))
    status, _, body = load(sagemaker, "123456789ensemble", url, target="123456789ensemble")
    assert (status, body) == (200, b"")
    assert model_state(server, "add_sub_step") == "READY"
    status, _, body = call(sagemaker, "GET", "/models/123456789ensemble")
    assert json.loads(body) == {"modelName": "123456789ensemble", "modelUrl": url}
    body, _ = add_sub_body()
    check_add_sub_json(*call(sagemaker, "POST", "/models/123456789ensemble/invoke", body,
                             dict(JSON, **{TARGET: "123456789ensemble"})),
                       model="123456789ensemble")
    status, _, body = call(sagemaker, "DELETE", "/models/123456789ensemble",
                           headers={TARGET: "123456789ensemble"})
    assert (status, body) == (200, b"")
    assert model_state(server, "add_sub_step") is None
    assert model_state(server, "123456789ensemble") is None


def test_the_target_model_header_names_the_model(server: tritonserver.Server,
                                                 sagemaker: SageMaker, root: str):
    """The hash addresses the endpoint; the header names the model the core
    loads, invokes and unloads (one model folder: the archive's only one)."""
    url = archive(root, "hash.with_dots", {"only": "add_sub_int32"})
    assert load(sagemaker, "hash.with_dots", url, target="customer_model")[::2] == (200, b"")
    assert model_state(server, "customer_model") == "READY"
    assert model_state(server, "hash.with_dots") is None
    # As Triton lists them: a hash whose model (by that name, version 1) is not ready is {}.
    assert json.loads(call(sagemaker, "GET", "/models")[2]) == {"models": [{}]}
    body, _ = add_sub_body()
    check_add_sub_json(*call(sagemaker, "POST", "/models/hash.with_dots/invoke", body,
                             dict(JSON, **{TARGET: "customer_model"})), model="customer_model")
    # Without the header the hash is the model's name: there is none by that name.
    status, _, data = call(sagemaker, "POST", "/models/hash.with_dots/invoke", body, JSON)
    assert status == 400 and "hash.with_dots" in support.json_error(data)
    assert call(sagemaker, "DELETE", "/models/hash.with_dots",
                headers={TARGET: "customer_model"})[0] == 200
    assert model_state(server, "customer_model") is None


def test_urls_outside_the_models_root_and_system_folders_are_refused(
        server: tritonserver.Server, sagemaker: SageMaker, root: str, outside: str):
    elsewhere = archive(outside, "h", {"model": "add_sub_int32"}, at_url=True)
    status, _, body = load(sagemaker, "h", elsewhere)
    assert status == 400 and support.json_error(body) == (
        f"Invalid \"url\" '{elsewhere}': expected a path of the form {root}/<hash>/model"
        "[/<subdir>]")
    bad_hash = archive(root, "bad-hash", {"model": "add_sub_int32"}, at_url=True)
    assert load(sagemaker, "b", bad_hash)[0] == 400
    # The default root is SageMaker's, with Triton's text.
    with frontend(server) as f:
        status, _, body = load(f, "h", elsewhere)
        assert status == 400 and support.json_error(body) == (
            f"Invalid \"url\" '{elsewhere}': expected a path of the form "
            "/opt/ml/models/<hash>/model[/<subdir>]")
    # /dev, /proc, /sys: an empty 400, before anything is read.
    for url in ("/dev/shm", "/proc/self/cwd", "/sys/kernel", f"{root}/../../../../../../dev/x"):
        assert load(sagemaker, "h", url)[::2] == (400, b""), url
    for body in (b"[1]", b"{", b'{"model_name": 1, "url": "x"}', b'{"url": 5}'):
        status, _, data = call(sagemaker, "POST", "/models", body, JSON)
        assert status == 400 and support.json_error(data), body
    assert json.loads(call(sagemaker, "GET", "/models")[2]) == {"models": []}


def inprocess_archive(root: str, model_hash: str, raising_in: str) -> str:
    """An archive whose model (run in this process) raises MemoryError in
    ``raising_in`` ("initialize" or "execute")."""
    url = os.path.join(root, model_hash, "model")
    shutil.rmtree(os.path.join(root, model_hash), ignore_errors=True)
    os.makedirs(os.path.join(url, "1"))
    with open(os.path.join(url, "config.pbtxt"), "w") as f:
        f.write('backend: "inprocess"\nmax_batch_size: 0\n'
                'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
                'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n')
    with open(os.path.join(url, "1", "model.py"), "w") as f:
        f.write(f"class TritonPythonModel:\n    def {raising_in}(self, *args):\n"
                f"        raise MemoryError('no memory left in {raising_in}')\n")
    return url


def test_a_failed_load_unregisters_and_out_of_memory_is_507(server: tritonserver.Server,
                                                             sagemaker: SageMaker, root: str):
    """A load that fails is a 400 (507 when its error says memory ran out,
    what SageMaker reads to evict models) and its repository is
    unregistered (loading it again fails the same way, not with 409); an
    invoke that runs out of memory is a 507 too, while /invocations keeps
    Triton's per-code status."""
    url = inprocess_archive(root, "oom_load", "initialize")
    for _ in range(2):
        status, _, body = load(sagemaker, "oom_load", url)
        assert status == 507 and "MemoryError: no memory left in initialize" in \
            support.json_error(body)
    url = inprocess_archive(root, "oom_run", "execute")
    assert load(sagemaker, "oom_run", url)[::2] == (200, b"")
    x = json.dumps({"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1],
                                "data": [1.0]}]}).encode()
    status, _, body = call(sagemaker, "POST", "/models/oom_run/invoke", x, JSON)
    assert status == 507 and "MemoryError: no memory left in execute" in \
        support.json_error(body)
    with frontend(server, default_model_name="oom_run") as f:
        status, _, body = call(f, "POST", "/invocations", x, JSON)
        assert status == 500 and "MemoryError" in support.json_error(body)
    assert call(sagemaker, "DELETE", "/models/oom_run")[0] == 200
    # A config the core refuses: 400, and nothing stays registered.
    broken = archive(root, "broken", {"model": "add_sub_int32"}, at_url=True)
    with open(os.path.join(broken, "config.pbtxt"), "a") as f:
        f.write("\nnot_a_field: 1\n")
    status, _, body = load(sagemaker, "broken", broken)
    assert status == 400 and support.json_error(body)
    shutil.copy(os.path.join(EXAMPLES, "add_sub_int32", "config.pbtxt"), broken)
    assert load(sagemaker, "broken", broken)[0] == 200
    assert call(sagemaker, "DELETE", "/models/broken")[0] == 200


def test_a_decoupled_model_is_refused_by_invoke_with_400(sagemaker: SageMaker, root: str):
    url = archive(root, "decoupled", {"model": "repeat_int32"}, at_url=True)
    assert load(sagemaker, "decoupled", url)[0] == 200
    body = json.dumps({"inputs": [{"name": "IN", "datatype": "INT32", "shape": [1],
                                   "data": [1]}]}).encode()
    status, _, data = call(sagemaker, "POST", "/models/decoupled/invoke", body, JSON)
    assert status == 400 and support.json_error(data) == DECOUPLED
    assert call(sagemaker, "DELETE", "/models/decoupled")[0] == 200


def test_restricted_apis(server: tritonserver.Server, root: str):
    url = archive(root, "restricted", {"model": "add_sub_int32"}, at_url=True)
    with frontend(server, default_model_name="add_sub_int32", models_root=root, ping_mode="live",
                  restricted_features=["inference:infer-key=yes",
                                       "model-repository,health:admin=secret"]) as f:
        def refused(method: str, path: str, header: str, body: bytes = b"") -> None:
            status, _, data = call(f, method, path, body, JSON)
            assert status == 403 and support.json_error(data) == (
                f"This API is restricted, expecting header '{header}'"), path

        refused("GET", "/ping", "admin")
        refused("POST", "/invocations", "infer-key", add_sub_body()[0])
        refused("GET", "/models", "admin")
        refused("GET", "/models/restricted", "admin")
        refused("POST", "/models", "admin", json.dumps({"model_name": "restricted",
                                                        "url": url}).encode())
        refused("DELETE", "/models/restricted", "admin")
        # Invoking a hash never loaded is a 404 before the restriction is looked at.
        assert call(f, "POST", "/models/restricted/invoke", b"{}", JSON)[::2] == (404, b"")
        admin = dict(JSON, admin="secret")
        assert call(f, "GET", "/ping", headers={"admin": "secret"})[0] == 200
        assert call(f, "POST", "/models", json.dumps({"model_name": "restricted",
                                                      "url": url}).encode(), admin)[0] == 200
        refused("POST", "/models/restricted/invoke", "infer-key", add_sub_body()[0])
        check_add_sub_json(*call(f, "POST", "/models/restricted/invoke", add_sub_body()[0],
                                 dict(JSON, **{"infer-key": "yes"})), model="restricted")
        check_add_sub_json(*call(f, "POST", "/invocations", add_sub_body()[0],
                                 dict(JSON, **{"infer-key": "yes"})))
        assert call(f, "DELETE", "/models/restricted", headers=admin)[0] == 200


# ---- Tracing ---------------------------------------------------------------------------------


def test_invocations_and_invoke_continue_the_clients_trace(server: tritonserver.Server,
                                                           sagemaker: SageMaker, root: str):
    """What Triton's QA checks (opentelemetry_unittest.py's
    test_sagemaker_invocation/invoke_trace_simple_model_context_propagation):
    the request's spans are children of the client's traceparent."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http",
                        reason="the otel extra is not installed")
    from frontends.otlp_receiver import Receiver

    client_trace, client_span = "0af7651916cd43dd8448eb211c12666c", "b7ad6b7169242424"
    headers = dict(JSON, traceparent=f"00-{client_trace}-{client_span}-01")
    url = archive(root, "traced", {"model": "add_sub_int32"}, at_url=True)
    assert load(sagemaker, "traced", url)[0] == 200
    receiver = Receiver()
    server.configure_tracing(trace_level="TIMESTAMPS", trace_rate=1, trace_mode="opentelemetry",
                             opentelemetry={"url": receiver.url, "bsp_schedule_delay": 50})
    try:
        for path, model in (("/invocations", "add_sub_int32"),
                            ("/models/traced/invoke", "traced")):
            receiver.clear()
            check_add_sub_json(*call(sagemaker, "POST", path, add_sub_body()[0], headers),
                               model=model)
            spans = receiver.wait_spans(3)
            assert sorted(s["name"] for s in spans) == sorted(["InferRequest", "compute",
                                                               model]), path
            root_span = [s for s in spans if s["name"] == "InferRequest"][0]
            assert root_span["traceId"] == client_trace and \
                root_span["parentSpanId"] == client_span, path
            assert [e["name"] for e in root_span["events"]] == [
                "HTTP_RECV_START", "HTTP_RECV_END", "INFER_RESPONSE_COMPLETE",
                "HTTP_SEND_START", "HTTP_SEND_END"]
            assert {s["traceId"] for s in spans} == {client_trace}
    finally:
        server.configure_tracing()
        receiver.stop()
        call(sagemaker, "DELETE", "/models/traced")


# ---- serve --allow-sagemaker -----------------------------------------------------------------

STARTED = re.compile(r"Started Sagemaker HTTPService at (\S+):(\d+)")


def serve_flags(*extra: str) -> list[str]:
    return ["--model-repository", EXAMPLES, "--http-port", "0", "--grpc-port", "0",
            "--metrics-port", "0", "--exit-timeout-secs", "10", *extra]


def test_serve_allow_sagemaker(monkeypatch: Any):
    monkeypatch.setenv("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME", "add_sub_int32")
    serve = Serve(*serve_flags("--allow-sagemaker=true", "--sagemaker-port=0",
                               "--sagemaker-thread-count=2", "--allow-grpc=false",
                               "--model-control-mode=explicit", "--load-model=add_sub_int32"))
    try:
        serve.wait_ready()
        match = STARTED.search(serve.output())
        assert match and match.group(1) == "127.0.0.1", serve.output()
        port = int(match.group(2))
        assert support.request(port, "GET", "/ping")[::2] == (200, b"")
        body, _ = add_sub_body()
        check_add_sub_json(*support.request(port, "POST", "/invocations", body, JSON))
        # The HTTP service's own routes are not SageMaker's.
        assert support.request(port, "GET", "/v2/health/ready")[::2] == (400, b"")
        serve.process.terminate()
        assert serve.wait() == 0, serve.output()
    finally:
        serve.end()


@pytest.mark.parametrize("flags, message", [
    (["--allow-sagemaker", "--sagemaker-port=8000", "--http-port=8000"],
     "The server cannot listen to HTTP requests and SageMaker requests at the same address "
     "and port 127.0.0.1:8000"),
    (["--allow-sagemaker", "--sagemaker-safe-port-range=9000-9100", "--http-port=8000"],
     "The server cannot listen to HTTP requests at port 8000, allowed port range is "
     "[9000, 9100]"),
    (["--sagemaker-safe-port-range=9000"],
     "Cannot parse pair option due to incorrect number of inputs.--<pair option> argument "
     "requires format <first>-<second>. Found: 9000"),
])
def test_serve_refuses_clashing_ports(flags: list[str], message: str):
    serve = Serve("--model-repository", EXAMPLES, *flags)
    try:
        assert serve.wait() == 2, serve.output()
        assert f"tritonserver serve: {message}" in serve.output()
    finally:
        serve.end()


def test_generated_bad_requests_get_client_errors_and_the_server_stays_live(
        server: tritonserver.Server, sagemaker: SageMaker):
    """Random bodies, truncations of a good one and random json-header-size
    values on every route: each gets a 4xx (a JSON error, or an empty body
    where Triton sends none), never a 5xx or a dropped connection; /ping and a
    good inference answer after them as before."""
    import random

    rng = random.Random(20261205)
    good, _ = add_sub_body()
    ping = call(sagemaker, "GET", "/ping")[0]  # earlier tests' failed loads may leave it 400
    statuses: dict[int, int] = {}
    for i in range(200):
        kind = i % 4
        if kind == 0:
            body = bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
        elif kind == 1:
            body = good[:rng.randrange(len(good))]
        elif kind == 2:
            body = json.dumps({"model_name": rng.choice(["", "h", 7, None]),
                               "url": rng.choice(["", "x", "/", 3, [], "/opt/ml/models"])}).encode()
        else:
            body = good
        headers = {"Content-Type": rng.choice(
            ["application/json", binary_type(rng.randrange(-5, len(body) + 50)),
             BINARY_MIME + rng.choice(["", "x", "99999999999", " 3"]), "text/plain"])}
        method, path = rng.choice([("POST", "/invocations"), ("POST", "/models"),
                                   ("POST", "/models/nope/invoke"), ("DELETE", "/models/nope"),
                                   ("GET", "/models/nope")])
        status, _, data = call(sagemaker, method, path, body, headers)
        statuses[status] = statuses.get(status, 0) + 1
        assert status in (200, 400, 404, 409), (method, path, headers, body[:80], status, data)
        if status == 400 and data:
            assert support.json_error(data)
    assert statuses.get(400, 0) > 50, statuses
    assert server.live()
    assert call(sagemaker, "GET", "/ping")[0] == ping
    check_add_sub_json(*call(sagemaker, "POST", "/invocations", good, JSON))
