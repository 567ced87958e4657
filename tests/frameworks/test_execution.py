"""What every framework backend does the same way when it runs a model:
the dynamic batcher's requests in one run, only the requested outputs
asked of the framework, every data type it serves round-tripping, and two
instances running at once while the framework computes with the GIL free."""

from __future__ import annotations

import numpy as np
import pytest

from frameworks.conftest import typed_values
from parallel_runs import all_at_once, batched, overlapping


@pytest.fixture(scope="module")
def repo(tmp_path_factory, framework):
    root = str(tmp_path_factory.mktemp(f"{framework.name}_repo"))
    framework.write(root, "add_sub", framework.add_sub(), framework.batched_add_sub_config())
    framework.write_identities(root)
    framework.write_slow(root)
    return root


def test_requests_batched_by_the_dynamic_batcher_run_together(server, framework):
    model = server.model("add_sub")
    (a, b), (total, diff) = framework.add_sub_names
    before = model.statistics()["model_stats"][0]
    feeds = [{a: np.full((1, 4), i, np.float32),
              b: np.full((1, 4), 1, np.float32)} for i in range(12)]
    for i, out in enumerate(all_at_once(model, feeds)):
        assert out[total].tolist() == [[i + 1.0] * 4]
        assert out[diff].tolist() == [[i - 1.0] * 4]
    batched(model, before, 12)  # some requests shared a run


def test_only_the_requested_outputs_reach_the_model(server, framework):
    """tritonclient names the outputs it wants: the request carries them to
    the model (the framework is asked for those only), the answer holds them."""
    import tritonclient.http as httpclient

    from tritonserver.frontends import KServeHttp

    (a_name, b_name), (total, diff) = framework.add_sub_names
    a = np.ones((1, 4), np.float32)
    with KServeHttp(server, KServeHttp.Options(port=0)) as frontend:
        client = httpclient.InferenceServerClient(frontend.url)
        inputs = [httpclient.InferInput(n, [1, 4], "FP32") for n in (a_name, b_name)]
        for tensor in inputs:
            tensor.set_data_from_numpy(a)
        result = client.infer("add_sub", inputs,
                              outputs=[httpclient.InferRequestedOutput(diff)])
        assert result.as_numpy(diff).tolist() == [[0.0] * 4]
        assert result.as_numpy(total) is None
        client.close()


def test_every_data_type_round_trips(server, framework):
    inputs = typed_values(framework.identity_types, framework.identity_shape)
    out = next(server.model("identities").infer(inputs=inputs)).outputs
    assert len(out) == len(framework.identity_types)
    for index, (name, value) in enumerate(inputs.items()):
        tensor = out[framework.output("OUT_" + name[len("IN_"):], index)]
        if value.dtype == object:
            encoded = np.array([v.encode() for v in value.flat], dtype=object)
            assert tensor.to_bytes_array().tolist() == encoded.reshape(value.shape).tolist()
        else:
            got = np.from_dlpack(tensor)
            assert got.dtype == value.dtype, name
            np.testing.assert_array_equal(got, value)


def test_instances_run_in_parallel_with_the_gil_free(server, repo, framework):
    """Two instances, two long runs at once: they overlap (they end close
    together, where one after the other they would end a whole run apart),
    a Python thread keeps ticking while they run (the framework releases
    the GIL), and both answer as the framework does."""
    model = server.model("slow")
    inputs = framework.slow_inputs()
    for _ in range(2):
        next(model.infer(inputs=inputs))  # warm up
    expected, rtol = framework.slow_answer(repo, inputs)
    for y in overlapping(model, inputs, framework.slow_output).outputs:
        np.testing.assert_allclose(np.from_dlpack(y), expected, rtol=rtol)
    assert model.config()["instance_group"][0]["count"] == 2
    assert model.statistics()["model_stats"][0]["execution_count"] >= 3
