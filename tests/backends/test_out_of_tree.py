"""Out-of-tree backends: the installed package's CMake config and headers,
examples/custom_backend built from them and served next to the package's own
backends, and how a user's backend folder is merged into the one the core
gets."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import tritonserver
from backends.build import build_project, cli
from conftest import TEST_MODELS, TESTS_DIR, skip_without_python_backend, start_server, stop_within

EXAMPLE = os.path.join(os.path.dirname(TESTS_DIR), "examples", "custom_backend")


@pytest.fixture(scope="module")
def example_backends() -> str:
    return os.path.join(build_project(EXAMPLE), "backends")


def test_cli_prints_the_cmake_package_and_include_folders():
    cmake_dir = cli("--cmakedir")
    assert os.path.isfile(os.path.join(cmake_dir, "tritonserverConfig.cmake"))
    flags = cli("--includes").split()
    assert flags and all(f.startswith("-I") for f in flags)
    folders = [f[2:] for f in flags]
    assert any(os.path.isfile(os.path.join(d, "tritonserver", "backend.h")) for d in folders)
    assert any(os.path.isfile(os.path.join(d, "triton", "tritonbackend.h")) for d in folders)


def test_example_backend_builds_loads_and_runs(example_backends, example_repo):
    lib = os.path.join(example_backends, "scale", "libtriton_scale.so")
    assert os.path.isfile(lib)
    s = start_server(model_repository=[os.path.join(EXAMPLE, "models"), example_repo],
                     backend_directory=example_backends)
    try:
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        out = next(s.model("scale_fp32").infer(inputs={"INPUT": x})).outputs["OUTPUT"]
        np.testing.assert_array_equal(np.from_dlpack(out), x * 2.5)
        # The package's own backends are still there beside the user's.
        out = next(s.model("add_sub_fp32").infer(inputs={"INPUT0": [1, 2], "INPUT1": [3, 4]}))
        assert np.from_dlpack(out.outputs["OUTPUT0"]).tolist() == [4, 6]
        del out
    finally:
        stop_within(s)


def test_example_backend_beside_the_python_backend(example_backends):
    skip_without_python_backend()
    s = start_server(model_repository=[os.path.join(EXAMPLE, "models"), TEST_MODELS],
                     backend_directory=example_backends,
                     model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                     startup_models=["scale_fp32", "python_affine"])
    try:
        assert s.model("scale_fp32").ready() and s.model("python_affine").ready()
        out = next(s.model("scale_fp32").infer(inputs={"INPUT": np.ones((1, 2), np.float32)}))
        assert np.from_dlpack(out.outputs["OUTPUT"]).tolist() == [[2.5, 2.5]]
        del out
    finally:
        stop_within(s)


def test_a_bad_model_parameter_fails_the_load_with_the_backends_message(example_backends,
                                                                          tmp_path):
    model = tmp_path / "scale_bad"
    shutil.copytree(os.path.join(EXAMPLE, "models", "scale_fp32"), model)
    config = (model / "config.pbtxt").read_text().replace('"scale_fp32"', '"scale_bad"')
    (model / "config.pbtxt").write_text(config.replace('"2.5"', '"two"'))
    s = start_server(model_repository=str(tmp_path), backend_directory=example_backends,
                     model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    try:
        with pytest.raises(tritonserver.InvalidArgumentError,
                           match="parameter 'factor' must be a number, not 'two'"):
            s.load("scale_bad")
        assert s.live()
    finally:
        stop_within(s)


def test_a_users_backend_wins_over_the_packages_of_the_same_name(example_backends, example_repo,
                                                                tmp_path):
    # An "identity" backend of the user's own: the scale library under that
    # name. identity_fp32's config has no factor: 1, so it is told apart by
    # its input name (scale reads INPUT, identity INPUT0).
    mine = tmp_path / "backends"
    (mine / "identity").mkdir(parents=True)
    shutil.copy(os.path.join(example_backends, "scale", "libtriton_scale.so"),
                mine / "identity" / "libtriton_identity.so")
    s = start_server(model_repository=example_repo, backend_directory=str(mine),
                     model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                     startup_models=["identity_fp32"])
    try:
        with pytest.raises(tritonserver.InvalidArgumentError, match="has no input 'INPUT'"):
            next(s.model("identity_fp32").infer(inputs={"INPUT0": np.ones(2, np.float32)}))
    finally:
        stop_within(s)


def test_backend_directory_must_be_a_folder(example_repo, tmp_path):
    with pytest.raises(tritonserver.InvalidArgumentError, match="backend_directory"):
        tritonserver.Server(model_repository=example_repo,
                            backend_directory=str(tmp_path / "missing")).start()


# --------------------------------------------------------------------------- #
# The assembled folder (no server)
# --------------------------------------------------------------------------- #


def _touch(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").close()


def test_user_folder_is_merged_with_the_packages(tmp_path):
    from tritonserver._core import backend_directory, find_core

    core = find_core()
    pkg, user = tmp_path / "pkg", tmp_path / "user"
    _touch(pkg / "identity" / "libtriton_identity.so")
    _touch(pkg / "repeat" / "libtriton_repeat.so")
    _touch(user / "identity" / "libtriton_identity.so")
    _touch(user / "custom" / "libtriton_custom.so")
    _touch(user / "custom" / "helper.so")
    _touch(user / "custom" / "libtritonserver.so")  # replaced by the real core
    _touch(user / "pybased" / "model.py")  # not a library backend: linked whole

    d = backend_directory(core, str(pkg), str(user))
    assert sorted(os.listdir(d)) == sorted(
        ["identity", "repeat", "custom", "pybased"] + (["python"] if core.stub_path else []))
    assert os.readlink(os.path.join(d, "identity", "libtriton_identity.so")) == \
        str(user / "identity" / "libtriton_identity.so")
    assert os.readlink(os.path.join(d, "repeat", "libtriton_repeat.so")) == \
        str(pkg / "repeat" / "libtriton_repeat.so")
    for name in ("identity", "repeat", "custom"):
        assert os.readlink(os.path.join(d, name, "libtritonserver.so")) == core.library
    assert os.readlink(os.path.join(d, "custom", "helper.so")) == str(user / "custom" / "helper.so")
    assert os.readlink(os.path.join(d, "pybased")) == str(user / "pybased")

    assert backend_directory(core, str(pkg), str(user)) == d  # once per process...
    _touch(user / "later" / "libtriton_later.so")
    d2 = backend_directory(core, str(pkg), str(user))  # ...until the user's folder changes
    assert d2 != d and os.path.isdir(os.path.join(d2, "later"))
