"""Models that fail to load say which and why: at start (every control mode),
with exit_on_error off (no hang waiting for readiness that cannot come), in
models() by bare name, and on an explicit load whose model the core could not
read from the repository (it answers only "failed to poll")."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tritonserver
from conftest import stop_within

IDENTITY = '''backend: "identity"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]
'''


def _model(repo: Path, name: str, config: "str | None") -> None:
    (repo / name / "1").mkdir(parents=True)
    if config is not None:
        (repo / name / "config.pbtxt").write_text(config)


@pytest.fixture
def broken_repo(tmp_path: Path) -> Path:
    """One good model and three that fail, each for another reason: a load
    failure (in the model index) and two the core only logs. The tests start
    their servers with strict_model_config=True (the default is False), so
    that the config-less model fails for want of a config."""
    repo = tmp_path / "repo"
    _model(repo, "good", IDENTITY)
    _model(repo, "no_backend", IDENTITY.replace('"identity"', '"no_such_backend"'))
    _model(repo, "bad_text", IDENTITY.replace("dims: [ -1 ] } ]\n", "dims: [ -1 ] }\n", 1))
    _model(repo, "no_config", None)
    return repo


def _assert_names_each_failure(message: str, repo: Path) -> None:
    assert "'no_backend': " in message and "unable to find backend library for backend " \
        "'no_such_backend'" in message
    assert f"'bad_text': failed to load 'bad_text', failed to poll from model repository: " \
        f"{repo / 'bad_text' / 'config.pbtxt'} does not parse: line 4" in message
    assert "'no_config': failed to load 'no_config', failed to poll from model repository: " \
        in message
    assert "has no config.pbtxt, and strict_model_config=True" in message
    assert "strict_model_config=False" in message
    assert "'good'" not in message


@pytest.mark.parametrize("mode", [tritonserver.ModelControlMode.NONE,
                                  tritonserver.ModelControlMode.POLL])
def test_a_failed_start_names_each_model_and_its_reason(broken_repo, mode):
    with pytest.raises(tritonserver.InternalError, match="^failed to load all models:") as e:
        tritonserver.Server(model_repository=str(broken_repo), strict_model_config=True, model_control_mode=mode).start()
    _assert_names_each_failure(str(e.value), broken_repo)


def test_explicit_startup_models_fail_with_their_reasons(broken_repo):
    with pytest.raises(tritonserver.InternalError) as e:
        tritonserver.Server(model_repository=str(broken_repo), strict_model_config=True,
                            model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                            startup_models=["good", "no_backend", "absent"]).start()
    message = str(e.value)
    assert "'no_backend': " in message and "'good'" not in message
    assert "'absent': failed to load 'absent', failed to poll from model repository: model " \
        "not found in any model repository (no folder 'absent' in: " in message


def test_with_block_raises_at_once_instead_of_waiting_forever(broken_repo):
    # exit_on_error=False keeps the server, but strict readiness can never
    # come: entering the block raises with the reasons, and the server stops.
    server = tritonserver.Server(model_repository=str(broken_repo), strict_model_config=True, exit_on_error=False)
    with pytest.raises(tritonserver.UnavailableError,
                       match="will not become ready") as e:
        with server:
            pytest.fail("entered a server that cannot become ready")
    _assert_names_each_failure(str(e.value), broken_repo)
    with pytest.raises(tritonserver.InvalidArgumentError, match="not started"):
        server.live()


def test_without_strict_readiness_the_block_runs(broken_repo):
    with tritonserver.Server(model_repository=str(broken_repo), strict_model_config=True, exit_on_error=False,
                             strict_readiness=False, exit_timeout=10) as server:
        assert server.model("good").ready() and not server.model("no_backend").ready()


def test_polled_repository_waits_within_its_timeout_and_says_why(broken_repo):
    # In POLL mode a fix on disk can still make the server ready: start()
    # waits, and its timeout names what it waited for.
    server = tritonserver.Server(model_repository=str(broken_repo), strict_model_config=True, exit_on_error=False,
                                 model_control_mode=tritonserver.ModelControlMode.POLL,
                                 exit_timeout=10)
    try:
        with pytest.raises(tritonserver.UnavailableError, match="not ready within 0.3 s") as e:
            server.start(wait_until_ready=True, timeout=0.3, polling_interval=0.05)
        _assert_names_each_failure(str(e.value), broken_repo)
        assert server.live()
    finally:
        stop_within(server)


def test_bare_name_shows_the_state_and_reason_of_its_versions(broken_repo):
    server = tritonserver.Server(model_repository=str(broken_repo), strict_model_config=True, exit_on_error=False,
                                 exit_timeout=10).start()
    try:
        models = server.models()
        failed, by_version = models["no_backend"], models[("no_backend", 1)]
        assert failed.state == by_version.state == "UNAVAILABLE"
        assert failed.reason == by_version.reason and "no_such_backend" in failed.reason
        assert failed.version == -1
        good = models["good"]
        assert (good.state, good.reason) == ("READY", None)
        assert models.get("no_backend").state == "UNAVAILABLE"
    finally:
        stop_within(server)


@pytest.fixture
def explicit_server(broken_repo):
    server = tritonserver.Server(model_repository=str(broken_repo), strict_model_config=True, exit_timeout=10,
                                 model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                                 startup_models=["good"]).start(wait_until_ready=True)
    yield server
    stop_within(server)


@pytest.mark.parametrize("name,parameters,reason", [
    ("absent", None, "model not found in any model repository (no folder 'absent' in: "),
    ("good", {"config": "{not json"}, "the 'config' load parameter is not valid JSON ("),
    ("good", {"config": "[1, 2]"}, "the 'config' load parameter must be a JSON object"),
    ("no_config", None, "has no config.pbtxt, and strict_model_config=True"),
    ("bad_text", None, "config.pbtxt does not parse: line 4"),
], ids=["absent", "not-json", "not-an-object", "no-config", "bad-text"])
def test_explicit_load_keeps_the_cores_text_and_adds_the_reason(explicit_server, name,
                                                                parameters, reason):
    with pytest.raises(tritonserver.InternalError) as e:
        explicit_server.load(name, parameters)
    message = str(e.value)
    assert message.startswith(f"failed to load '{name}', failed to poll from model repository: ")
    assert reason in message
    assert explicit_server.live() and explicit_server.model("good").ready()


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=st.one_of(st.text(max_size=40), st.builds(json.dumps, st.dictionaries(
    st.sampled_from(["name", "backend", "max_batch_size", "input", "output"]),
    st.one_of(st.integers(-3, 3), st.text(max_size=8), st.lists(st.integers(), max_size=2)),
    max_size=4))))
def test_generated_config_overrides_fail_with_a_reason_and_the_server_lives(explicit_server,
                                                                            config):
    try:
        explicit_server.load("generated", {"config": config,
                                           "file:1/unused.bin": b"\x00"})
    except tritonserver.TritonError as e:
        assert str(e).strip(), "an error without a message"
    else:  # a generated config that the identity backend accepts: fine too
        explicit_server.unload("generated", wait_until_unloaded=True, timeout=30)
    assert explicit_server.live() and explicit_server.model("good").ready()
    assert os.path.isdir(explicit_server.options.model_repository)


@pytest.mark.parametrize("name,text", [
    ("..", "invalid model name '..', model name must not contain path traversal characters"),
    ("../repo", "invalid model name '../repo', model name must not contain path traversal"),
    ("  ", "Model name cannot be empty. Please enter a valid name to deploy."),
    ("", "Model name cannot be empty. Please enter a valid name to deploy."),
])
def test_a_load_may_not_name_a_folder_outside_the_repository(explicit_server, name, text):
    """As Triton refuses since core 2.60 (the 2.51 core would poll the
    repository's parent folder for '..')."""
    with pytest.raises(tritonserver.InvalidArgumentError) as e:
        explicit_server.load(name)
    assert text in str(e.value)
    assert explicit_server.live() and explicit_server.model("good").ready()
