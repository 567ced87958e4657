"""``serve``'s flags for the core's own settings, tested by their effect on
the real core: the local response cache answers a repeated request (a cache
hit in the statistics), the rate limiter refuses an instance that needs more
of a resource than given and runs one that fits, a host policy binds the
instances' threads, metrics settings add the summaries, the repository agent
folder is where agents are looked for, buffer manager threads are started;
refused flags and the start-up table's model control mode."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import tritonserver
from frontends import support
from frontends.serve_process import Serve

import tritonclient.http as httpclient  # noqa: E402

RESOURCES = {
    "limited": ' rate_limiter { resources [ { name: "R1", count: 10 } ] }',
    "starved": ' rate_limiter { resources [ { name: "R2", count: 20 } ] }',
}


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> str:
    """identity_fp32 as: cached (response_cache on), limited (needs 10 of
    R1), starved (needs 20 of R2), agent (a checksum repository agent)."""
    root = str(tmp_path_factory.mktemp("options_repo"))
    source = os.path.join(tritonserver.example_model_repository(), "identity_fp32")
    with open(os.path.join(source, "config.pbtxt")) as f:
        base = "".join(line for line in f if not line.startswith("instance_group"))
    for name in ("cached", "limited", "starved", "agent"):
        shutil.copytree(source, os.path.join(root, name))
        extra = f'instance_group [ {{ kind: KIND_CPU, count: 1{RESOURCES.get(name, "")} }} ]\n'
        if name == "cached":
            extra += "response_cache { enable: true }\n"
        if name == "agent":
            extra += 'model_repository_agents { agents [ { name: "checksum" } ] }\n'
        with open(os.path.join(root, name, "config.pbtxt"), "w") as f:
            f.write(base.replace("identity_fp32", name) + extra)
    return root


def flags(repository: str, *extra: str) -> list[str]:
    return ["--model-repository", repository, "--http-port", "0", "--grpc-port", "0",
            "--metrics-port", "0", "--exit-on-error=false", "--exit-timeout-secs", "10",
            "--rate-limit=execution_count", "--rate-limit-resource=R1:10",
            "--rate-limit-resource=R2:5:0", *extra]


def threads(serve: Serve) -> int:
    return len(os.listdir(f"/proc/{serve.process.pid}/task"))


def infer_twice_and_statistics(port: int, model: str) -> dict:
    client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
    try:
        x = np.arange(4, dtype=np.float32)
        for _ in range(2):
            inp = httpclient.InferInput("INPUT0", [4], "FP32")
            inp.set_data_from_numpy(x)
            np.testing.assert_array_equal(client.infer(model, [inp]).as_numpy("OUTPUT0"), x)
        return client.get_inference_statistics(model)["model_stats"][0]["inference_stats"]
    finally:
        client.close()


def test_core_settings_take_effect(repository, tmp_path):
    agents = tmp_path / "agents"
    agents.mkdir()
    baseline = Serve(*flags(repository, "--response-cache-byte-size=1048576", "--log-info=false"))
    try:
        baseline.wait_ready()
        baseline_threads = threads(baseline)
        # The deprecated flag: the local cache, with the executable's warning.
        stats = infer_twice_and_statistics(baseline.ports["HTTPService"], "cached")
        assert stats["cache_hit"]["count"] == 1 and stats["cache_miss"]["count"] == 1
        assert "Warning: '--response-cache-byte-size' has been deprecated!" in baseline.output()
    finally:
        baseline.end()

    serve = Serve(*flags(repository, "--cache-config=local,size=1048576",
                         "--metrics-config=summary_latencies=true",
                         f"--repoagent-directory={agents}", "--buffer-manager-thread-count=6",
                         "--host-policy=cpu,cpu-cores=0-0", "--log-verbose=1",
                         "--grpc-infer-allocation-pool-size=16"))
    try:
        serve.wait_ready()
        # Six buffer manager threads; everything else as in the first run.
        assert threads(serve) == baseline_threads + 6
        port = serve.ports["HTTPService"]
        stats = infer_twice_and_statistics(port, "cached")
        assert stats["cache_hit"]["count"] == 1 and stats["cache_miss"]["count"] == 1
        # The rate limiter: R1 suffices for 'limited'; 5 of R2 cannot run 'starved'.
        infer_twice_and_statistics(port, "limited")
        status, _, _ = support.request(port, "GET", "/v2/models/starved/ready")
        assert status == 400
        out = serve.output()
        assert ('Resource count for "R2" is limited to 5 which will prevent scheduling of one '
                'or more model instances, the minimum required count is 20') in out
        assert "| rate_limit                       | EXEC_COUNT" in out
        # Repository agents are looked for in the folder given.
        assert ("unable to find 'libtritonrepoagent_checksum.so' for repo agent 'checksum', "
                f"searched: {agents}") in out
        # The host policy 'cpu' binds the CPU instances' threads.
        assert "Thread is binding to one of the CPUs: [0,]" in out
        # The cache is the core's (the options table says so).
        assert "| cache_enabled                    | 1" in out
        status, _, body = support.request(serve.ports["Metrics Service"], "GET", "/metrics")
        assert status == 200
        # Summaries (summary_latencies): two requests queued, one computed, one from the cache.
        for line in (b'nv_inference_queue_summary_us_count{model="cached",version="1"} 2',
                     b'nv_inference_compute_infer_summary_us_count{model="cached",version="1"} 1',
                     b'nv_cache_hit_summary_per_model_count{model="cached",version="1"} 1'):
            assert line in body
    finally:
        serve.end()


def test_start_up_table_names_the_mode_the_user_chose(repository):
    serve = Serve("--model-repository", repository, "--http-port", "0", "--grpc-port", "0",
                  "--metrics-port", "0", "--exit-on-error=false", "--allow-grpc=false",
                  "--allow-metrics=false")
    try:
        serve.wait_ready()
        out = serve.output()
        assert "| model_control_mode               | MODE_NONE " in out
        assert "MODE_EXPLICIT" not in out
    finally:
        serve.end()


def test_a_model_config_name_picks_each_models_named_config(tmp_path):
    """--model-config-name=NAME: a model with configs/NAME.pbtxt is
    configured by it (here: another max_batch_size and two instances), one
    without by its config.pbtxt."""
    source = os.path.join(tritonserver.example_model_repository(), "identity_fp32")
    for name in ("named", "plain"):
        shutil.copytree(source, tmp_path / name)
    with open(os.path.join(source, "config.pbtxt")) as f:
        base = "".join(line for line in f if not line.startswith("instance_group"))
    for name in ("named", "plain"):
        (tmp_path / name / "config.pbtxt").write_text(base.replace("identity_fp32", name))
    (tmp_path / "named" / "configs").mkdir()
    (tmp_path / "named" / "configs" / "h100.pbtxt").write_text(
        base.replace("identity_fp32", "named")
        + "instance_group [ { kind: KIND_CPU, count: 2 } ]\n"
        + 'parameters { key: "picked" value { string_value: "h100" } }\n')
    serve = Serve("--model-repository", str(tmp_path), "--http-port", "0", "--grpc-port", "0",
                  "--metrics-port", "0", "--model-config-name=h100")
    try:
        serve.wait_ready()
        port = serve.ports["HTTPService"]
        client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
        try:
            named = client.get_model_config("named")
            plain = client.get_model_config("plain")
        finally:
            client.close()
        assert named["parameters"]["picked"]["string_value"] == "h100"
        assert named["instance_group"][0]["count"] == 2
        assert "picked" not in plain.get("parameters", {})
        infer_twice_and_statistics(port, "named")
    finally:
        serve.end()


@pytest.mark.parametrize("flag, reason", [
    ("--cuda-memory-pool-byte-size=0:1024", "no GPU support"),
    ("--enable-peer-access=true", "no GPU support"),
    ("--vertex-ai-port=8080", "no Vertex AI frontend"),
])
def test_refused_flags_say_why(repository, flag, reason):
    serve = Serve("--model-repository", repository, flag)
    try:
        assert serve.wait() == 2, serve.output()
        assert reason in serve.output() and "unrecognized" not in serve.output()
    finally:
        serve.end()


def test_a_host_policy_setting_the_core_refuses_fails_the_start(repository):
    serve = Serve(*flags(repository, "--host-policy=cpu,cores=0"))
    try:
        assert serve.wait() == 1, serve.output()
        assert "Unsupported host policy setting 'cores'" in serve.output()
    finally:
        serve.end()
