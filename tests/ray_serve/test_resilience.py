"""Replicas failing and going away under HTTP traffic through Ray's proxy:
a replica process killed mid-traffic is replaced; a replica whose Server
stops being live fails Ray's health check and is replaced, its requests
answered 503 (UNAVAILABLE); scaling down drains a replica without failing a
request. No request hangs (Traffic fails the test if one does)."""

from __future__ import annotations

import os
import signal
import time
from typing import Callable

import pytest
from ray import serve

import tritonserver
import tritonserver.ray
from frontends import support
from ray_serve import cluster, replica_models

pytestmark = pytest.mark.timeout(300)

EXAMPLES = tritonserver.example_model_repository()
SLEEP_PATH = "/v2/models/sleep_us/infer"
SLEEP_BODY = cluster.sleep_body(20_000)  # 20 ms a request
FAST_HEALTH = {"health_check_period_s": 1, "health_check_timeout_s": 10}  # passed through
REPLACE_TIMEOUT_S = 120


def _deploy(app_name: str, **settings: object) -> None:
    app = tritonserver.ray.application(model_repository=EXAMPLES,
                                       ray_actor_options={"num_cpus": 0.5}, **settings)
    serve.run(app, name=app_name, route_prefix="/")


def _replaced(app_name: str, old: dict[str, int]) -> bool:
    """Two replicas run again and one of them is new."""
    if cluster.running_replicas(app_name) != 2:
        return False
    try:
        now = cluster.replicas(app_name, 2, timeout=10)
    except (AssertionError, Exception):
        return False
    return bool(set(now) - set(old))


def _flowing(traffic: cluster.Traffic, since: float, count: int = 20) -> None:
    cluster.wait_for(lambda: traffic.count_since(since) >= count, 60,
                     f"{count} answered requests")


def _replaced_under_traffic(port: int, app_name: str, old: dict[str, int],
                            fault: Callable[[], None]) -> tuple[cluster.Traffic, float, float]:
    """Traffic through the proxy; ``fault()`` once it flows; wait until one of
    the old replicas is replaced and traffic flows again. (traffic, fault
    time, recovery time)."""
    with cluster.Traffic(port, SLEEP_PATH, SLEEP_BODY) as traffic:
        _flowing(traffic, 0.0)
        fault_at = time.monotonic()
        fault()
        cluster.wait_for(lambda: _replaced(app_name, old), REPLACE_TIMEOUT_S,
                         "a replacement replica")
        recovered = time.monotonic()
        _flowing(traffic, recovered)
    late = [a for a in traffic.answers if a.start >= recovered]
    assert late and all(a.status == 200 for a in late)
    return traffic, fault_at, recovered


def test_killed_replica_is_replaced_and_traffic_continues(ray_cluster, app_name):
    _deploy(app_name, num_replicas=2, **FAST_HEALTH)
    old = cluster.replicas(app_name, 2)
    victim = next(iter(old.values()))
    traffic, killed_at, recovered = _replaced_under_traffic(
        ray_cluster.port, app_name, old, lambda: os.kill(victim, signal.SIGKILL))
    failures = traffic.failures()
    print(f"\n[ray] replica killed: {len(traffic.answers)} requests, {len(failures)} failed "
          f"(statuses {sorted({f.status for f in failures}, key=str)}), replaced in "
          f"{recovered - killed_at:.1f} s")
    assert all(f.start >= killed_at - 0.5 for f in failures), "a request failed before the kill"
    # Requests Ray had sent to the dead replica: its proxy retries them or
    # answers 500 naming the dead actor.
    assert all(f.status in (500, 503) for f in failures), failures[:3]
    assert victim not in cluster.replicas(app_name, 2).values()


def test_replica_whose_server_stops_is_replaced(ray_cluster, app_name):
    _deploy(app_name, num_replicas=2, setup=replica_models.register_stopper, **FAST_HEALTH)
    old = cluster.replicas(app_name, 2)

    def stop_one_server() -> None:
        status, _, body = support.request(
            ray_cluster.port, "POST", "/v2/models/stop_server/infer",
            b'{"inputs":[{"name":"IN","shape":[1],"datatype":"INT32","data":[1]}]}')
        # Its own answer races the stop: a result, or UNAVAILABLE.
        assert status in (200, 503), body

    traffic, stopped_at, recovered = _replaced_under_traffic(
        ray_cluster.port, app_name, old, stop_one_server)
    failures = traffic.failures()
    print(f"\n[ray] server stopped in a replica: {len(traffic.answers)} requests, "
          f"{len(failures)} answered 503, replaced in {recovered - stopped_at:.1f} s")
    assert all(f.status == 503 for f in failures), failures[:3]


def test_scale_down_drains_a_replica_without_failing_requests(ray_cluster, app_name):
    # Ray's autoscaler starts two replicas and, with one request at a time
    # against a target of two per replica, removes one under traffic.
    autoscaling = {"min_replicas": 1, "max_replicas": 2, "initial_replicas": 2,
                   "target_ongoing_requests": 2, "upscale_delay_s": 60,
                   "downscale_delay_s": 2}
    _deploy(app_name, autoscaling_config=autoscaling)
    old = cluster.replicas(app_name, 2)
    with cluster.Traffic(ray_cluster.port, SLEEP_PATH, SLEEP_BODY, threads=1) as traffic:
        _flowing(traffic, 0.0)
        cluster.wait_for(lambda: cluster.running_replicas(app_name) == 1, REPLACE_TIMEOUT_S,
                         "the autoscaler to remove a replica")
        _flowing(traffic, time.monotonic())
    print(f"\n[ray] scale-down 2 -> 1 under traffic: {len(traffic.answers)} requests, "
          f"{len(traffic.failures())} failed")
    assert traffic.failures() == []
    # The replica left is one of the two: Ray drained the other, replaced none.
    assert set(cluster.replicas(app_name, 1)) <= set(old)
