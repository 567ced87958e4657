"""tritonserver.ray on a local Ray cluster: two replicas behind Ray's HTTP
proxy serving tritonclient, the handle API (numpy out, streaming, errors as
TritonError classes, a call from another deployment), and the settings split
between the Server's options and Ray Serve's deployment."""

from __future__ import annotations

import numpy as np
import pytest
from ray import serve

import tritonserver
import tritonserver.ray
from ray_serve import cluster

import tritonclient.http as httpclient  # noqa: E402

pytestmark = pytest.mark.timeout(300)

EXAMPLES = tritonserver.example_model_repository()
HALF_CPU = {"num_cpus": 0.5}


def _deploy(app_name: str, **settings: object) -> serve.handle.DeploymentHandle:
    app = tritonserver.ray.application(model_repository=EXAMPLES, **settings)
    return serve.run(app, name=app_name, route_prefix="/")


def test_tritonclient_through_rays_proxy_reaches_both_replicas(ray_cluster, app_name):
    _deploy(app_name, num_replicas=2, ray_actor_options=HALF_CPU)
    client = httpclient.InferenceServerClient(ray_cluster.url, concurrency=8)
    try:
        assert client.is_server_live() and client.is_server_ready()
        assert client.is_model_ready("add_sub_fp32")
        assert client.get_model_metadata("add_sub_fp32")["name"] == "add_sub_fp32"
        rng = np.random.default_rng(7)
        sent, pending = [], []
        for _ in range(64):
            a, b = (rng.standard_normal(16).astype(np.float32) for _ in range(2))
            inputs = [httpclient.InferInput("INPUT0", [16], "FP32"),
                      httpclient.InferInput("INPUT1", [16], "FP32")]
            inputs[0].set_data_from_numpy(a)
            inputs[1].set_data_from_numpy(b, binary_data=True)
            sent.append((a, b))
            pending.append(client.async_infer("add_sub_fp32", inputs))
        for (a, b), future in zip(sent, pending):
            result = future.get_result()
            np.testing.assert_allclose(result.as_numpy("OUTPUT0"), a + b, rtol=1e-6)
            np.testing.assert_allclose(result.as_numpy("OUTPUT1"), a - b, rtol=1e-6)
        with pytest.raises(tritonclient_error()) as info:
            client.infer("no_such_model", inputs)
        assert info.value.status() == "400" or "no_such_model" in info.value.message()
    finally:
        client.close()

    served = [sum(s["inference_count"] for s in replica["model_stats"]
                  if s["name"] == "add_sub_fp32")
              for replica in cluster.replica_statistics(app_name, 2)]
    print(f"\n[ray] add_sub_fp32 requests per replica: {served}")
    assert sum(served) == 64 and all(n > 0 for n in served), served


def tritonclient_error() -> type:
    from tritonclient.utils import InferenceServerException

    return InferenceServerException


def test_handle_api_returns_numpy_streams_and_raises_triton_errors(ray_cluster, app_name):
    handle = _deploy(app_name, num_replicas=1, ray_actor_options=HALF_CPU)
    a = np.arange(8, dtype=np.float32)
    out = handle.infer.remote("add_sub_fp32", {"INPUT0": a, "INPUT1": a * 2}).result()
    np.testing.assert_array_equal(out["OUTPUT0"], a * 3)
    np.testing.assert_array_equal(out["OUTPUT1"], -a)

    text = handle.infer.remote("identity_bytes",
                               {"INPUT0": np.array([b"caf\xc3\xa9", b"\x00\xff"], dtype=object)})
    assert list(text.result()["OUTPUT0"]) == [b"caf\xc3\xa9", b"\x00\xff"]

    values = [3, 1, 4, 1, 5]
    stream = handle.options(stream=True).stream.remote(
        "repeat_int32", {"IN": np.array(values, dtype=np.int32)})
    assert [int(chunk["OUT"][0]) for chunk in stream] == values

    with pytest.raises(tritonserver.NotFoundError):
        handle.infer.remote("no_such_model", {"INPUT0": a}).result()
    with pytest.raises(tritonserver.InvalidArgumentError):
        handle.infer.remote("add_sub_fp32", {"INPUT0": a.astype(np.int64),
                                             "INPUT1": a}).result()
    with pytest.raises(tritonserver.InvalidArgumentError, match="stream"):
        handle.infer.remote("repeat_int32", {"IN": np.array([1, 2], dtype=np.int32)}).result()
    # The replica is still serving after the bad calls.
    assert handle.infer.remote("add_sub_fp32", {"INPUT0": a, "INPUT1": a}).result()["OUTPUT0"][1] == 2


@serve.deployment(ray_actor_options={"num_cpus": 0.25})
class Doubler:
    """Another deployment calling the Triton deployment through its handle."""

    def __init__(self, triton: serve.handle.DeploymentHandle) -> None:
        self._triton = triton

    async def __call__(self, values: list) -> list:
        x = np.asarray(values, dtype=np.float32)
        outputs = await self._triton.infer.remote("add_sub_fp32", {"INPUT0": x, "INPUT1": x})
        return outputs["OUTPUT0"].tolist()


def test_another_deployment_awaits_the_handle(ray_cluster, app_name):
    triton = tritonserver.ray.application(model_repository=EXAMPLES, num_replicas=1,
                                          ray_actor_options=HALF_CPU)
    handle = serve.run(Doubler.bind(triton), name=app_name, route_prefix=None)
    assert handle.remote([1.0, 2.5, -4.0]).result() == [2.0, 5.0, -8.0]


def test_openai_api_on_rays_port_beside_kserve(ray_cluster, app_name):
    """OpenAI's API and KServe's on Ray's one HTTP port: the openai client
    streams from a replica's decoupled model, tritonclient infers on the
    same port, and each protocol answers its own errors."""
    openai = pytest.importorskip("openai")
    from tritonserver.frontends import OpenAISettings

    from ray_serve.replica_models import register_upper_words

    _deploy(app_name, num_replicas=1, ray_actor_options=HALF_CPU, setup=register_upper_words,
            openai=OpenAISettings())
    client = openai.OpenAI(base_url=f"http://{ray_cluster.url}/v1", api_key="unused",
                           max_retries=0)
    assert "upper_words" in [m.id for m in client.models.list().data]
    pieces = [chunk.choices[0].text for chunk in client.completions.create(
        model="upper_words", prompt="on one port", stream=True)]
    assert "".join(pieces) == "ON ONE PORT "
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="no_such_model", prompt="x")
    kserve = httpclient.InferenceServerClient(ray_cluster.url)
    try:
        assert kserve.is_server_ready() and kserve.is_model_ready("upper_words")
        a = np.ones(4, dtype=np.float32)
        inputs = [httpclient.InferInput("INPUT0", [4], "FP32"),
                  httpclient.InferInput("INPUT1", [4], "FP32")]
        for tensor in inputs:
            tensor.set_data_from_numpy(a)
        result = kserve.infer("add_sub_fp32", inputs)
        np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + a)
    finally:
        kserve.close()


def test_settings_split_between_server_options_and_the_deployment():
    options = tritonserver.Options(model_repository=EXAMPLES, log_verbose=1,
                                   strict_model_config=True)
    app = tritonserver.ray.application(options, strict_model_config=False, num_replicas=3,
                                       max_ongoing_requests=7,
                                       ray_actor_options={"num_cpus": 0.25})
    deployment = app._bound_deployment
    assert (deployment.num_replicas, deployment.max_ongoing_requests) == (3, 7)
    assert deployment.ray_actor_options == {"num_cpus": 0.25}
    server_options = deployment.init_args[0]
    assert server_options.log_verbose == 1 and server_options.strict_model_config is False
    assert options.strict_model_config is True  # the caller's options are not changed

    with pytest.raises(tritonserver.InvalidArgumentError, match="num_replica"):
        tritonserver.ray.application(model_repository=EXAMPLES, num_replica=2)
    with pytest.raises(tritonserver.InvalidArgumentError) as info:
        tritonserver.ray.application("models")  # type: ignore[arg-type]
    assert isinstance(info.value, TypeError)
    with pytest.raises(tritonserver.InvalidArgumentError, match="setup"):
        tritonserver.ray.application(model_repository=EXAMPLES, setup=42)  # type: ignore
