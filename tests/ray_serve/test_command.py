"""``python -m tritonserver serve --ray`` as a subprocess: it starts a Ray
cluster of its own, serves tritonclient through Ray's proxy (or its HAProxy
ingress) from two replicas, exits 0 on SIGTERM and leaves no Ray process
behind; bad Ray flags are refused before anything starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import tritonserver
from frontends import support
from frontends.serve_process import PACKAGE_PARENT, Serve
from ray_serve import cluster

import tritonclient.http as httpclient  # noqa: E402

pytestmark = pytest.mark.timeout(300)


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


@pytest.mark.parametrize("ingress", ["proxy", "haproxy"])
def test_serve_ray_answers_tritonclient_and_leaves_no_ray_process(ingress, monkeypatch):
    port = support.free_port()
    if ingress == "haproxy":  # its stats and metrics ports are fixed unless set
        monkeypatch.setenv("RAY_SERVE_HAPROXY_STATS_PORT", str(support.free_port()))
        monkeypatch.setenv("RAY_SERVE_HAPROXY_METRICS_PORT", str(support.free_port()))
    serve = Serve("--ray", "--ray-ingress", ingress, "--model-repository",
                  tritonserver.example_model_repository(), "--http-port", str(port),
                  "--num-replicas", "2", "--num-cpus", "0.5", "--exit-timeout-secs", "10")
    try:
        serve.wait_ready()
        client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
        a = np.arange(16, dtype=np.int32)
        inputs = [httpclient.InferInput("INPUT0", [16], "INT32"),
                  httpclient.InferInput("INPUT1", [16], "INT32")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(a)
        np.testing.assert_array_equal(
            client.infer("add_sub_int32", inputs).as_numpy("OUTPUT0"), a * 2)
        client.close()
        ray_children = {pid for pid in _descendants(serve.process.pid)
                        if pid in cluster.ray_processes()}
        assert ray_children, "the command started no Ray process of its own"
        serve.process.send_signal(signal.SIGTERM)
        assert serve.wait() == 0, serve.output()
        cluster.wait_gone({pid: "" for pid in cluster.ray_processes()
                           if pid not in ray_children})
    finally:
        serve.end()


@pytest.mark.parametrize("flags, message", [
    (["--num-replicas", "two"], "--num-replicas"),
    (["--autoscaling-config", "{not json"], "--autoscaling-config"),
    (["--ray-actor-options", "[1]"], "--ray-actor-options"),
    (["--num-cpus", "-1"], "--num-cpus"),
    (["--ray-ingress", "haproxy", "--ray-address", "auto"], "--ray-ingress"),
])
def test_serve_ray_refuses_bad_flags(flags, message):
    done = subprocess.run(
        [sys.executable, "-m", "tritonserver", "serve", "--ray", "--model-repository",
         tritonserver.example_model_repository(), *flags],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=PACKAGE_PARENT))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
