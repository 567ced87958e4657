"""Backends found by entry point, on a real server: a distribution made on
the spot (tests/unit/plugin_dists.py) serves backend "doubler"; two
distributions claiming it, a class written for another API version and
discovery switched off each refuse the model with their reason, and the
server stays live."""

from __future__ import annotations

import numpy as np
import pytest

import tritonserver
from conftest import start_server, stop_within
from tritonserver._framework import _plugins
from unit.plugin_dists import DOUBLER, make_distribution

EXPLICIT = tritonserver.ModelControlMode.EXPLICIT
CONFIG = """backend: "doubler"
max_batch_size: 8
input [{ name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] }]
output [{ name: "OUTPUT" data_type: TYPE_FP32 dims: [ -1 ] }]
parameters [{ key: "factor" value: { string_value: "3" } }]
instance_group [{ kind: KIND_CPU count: 2 }]
dynamic_batching {}
"""


@pytest.fixture
def repo(tmp_path):
    folder = tmp_path / "repo" / "tripled"
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(CONFIG, encoding="utf-8")
    return str(tmp_path / "repo")


@pytest.fixture
def distributions(tmp_path, monkeypatch):
    """add(name, module, api_version): a distribution declaring "doubler"."""
    def add(name: str, module: str, api_version: str = "1.0") -> None:
        folder = make_distribution(tmp_path / name, name, "1.0", {"doubler": f"{module}:Doubler"},
                                   {module: DOUBLER.format(version=api_version)})
        monkeypatch.syspath_prepend(str(folder))
        _plugins.refresh()
    yield add
    _plugins.refresh()


def refused(repo: str) -> str:
    server = start_server(model_repository=repo, model_control_mode=EXPLICIT)
    try:
        with pytest.raises(tritonserver.TritonError) as caught:
            server.load("tripled")
        assert server.live()
        return str(caught.value)
    finally:
        stop_within(server)


def test_a_plugin_distribution_serves_its_backend(repo, distributions):
    distributions("plugin-doubler", "mech_ok")
    server = start_server(model_repository=repo, model_control_mode=EXPLICIT)
    try:
        model = server.load("tripled")
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        out = next(model.infer(inputs={"INPUT": x})).outputs
        np.testing.assert_array_equal(np.from_dlpack(out["OUTPUT"]), x * 3)
    finally:
        stop_within(server)


def test_two_distributions_claiming_the_name_refuse_the_model(repo, distributions):
    distributions("plugin-one", "mech_one")
    distributions("plugin-two", "mech_two")
    text = refused(repo)
    assert "backend 'doubler' is declared by 2 distributions" in text
    assert "plugin-one 1.0 (mech_one:Doubler)" in text and "plugin-two 1.0 (mech_two:Doubler)" in text


def test_a_backend_for_another_api_version_is_refused(repo, distributions):
    distributions("plugin-future", "mech_future", api_version="2.0")
    text = refused(repo)
    assert "backend 'doubler' (mech_future:Doubler from plugin-future 1.0) needs backend API 2.0" \
        in text and "provides 1.0" in text


def test_discovery_off_leaves_the_backend_unknown(repo, distributions, monkeypatch):
    distributions("plugin-hidden", "mech_hidden")
    monkeypatch.setenv(_plugins.DISCOVERY_ENV, "0")
    text = refused(repo)
    assert "unable to find backend library for backend 'doubler'" in text
