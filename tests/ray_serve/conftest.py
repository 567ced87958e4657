"""A local Ray cluster for the tests, started once with the machine's CPUs
and no dashboard, with Serve's HTTP proxy on a free loopback port; at the end
Serve and the cluster are shut down."""

from __future__ import annotations

import os
from typing import Iterator

import pytest

pytest.importorskip("ray.serve", reason='needs the ray extra: pip install "tritonserver[ray]"')

import ray  # noqa: E402
from ray import serve  # noqa: E402

from frontends import support  # noqa: E402
from ray_serve import cluster  # noqa: E402


@pytest.fixture(scope="package")
def ray_cluster() -> Iterator[cluster.Cluster]:
    before = cluster.ray_processes()
    port = support.free_port()
    ray.init(num_cpus=os.cpu_count() or 2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": cluster.replica_env()})
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        yield cluster.Cluster(port)
    finally:
        try:
            serve.shutdown()
        finally:
            ray.shutdown()
    cluster.wait_gone(before)


@pytest.fixture
def app_name(ray_cluster: cluster.Cluster) -> Iterator[str]:
    """One application per test, deleted (its replicas drained) at the end."""
    yield "tritonserver"
    serve.delete("tritonserver")
