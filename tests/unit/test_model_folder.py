"""Tests of tritonserver._control.model_folder on model folders made here:
where the core finds a model (the repositories it started with, those
registered since, name mappings), the configuration a load reads, and the
backend the core picks for it."""

from __future__ import annotations

import json

import pytest

from tritonserver._control.model_folder import Repositories, backend_of, repositories
from tritonserver._options import Options, ServeOptions
from unit.conftest import write_model

PYTHON = 'backend: "python"\n'


# ---- where the core finds a model --------------------------------------------------------


def test_folders_in_every_repository_sorted_as_the_core_keeps_them(tmp_path):
    for repo in ("b", "a", "c"):
        write_model(tmp_path / repo, "m")
    (tmp_path / "c" / "file_not_folder").write_text("")
    found = Repositories([str(tmp_path / "b"), str(tmp_path / "a")])
    assert found.folders("m") == [str(tmp_path / "a" / "m"), str(tmp_path / "b" / "m")]
    found.register(str(tmp_path / "c"))
    assert found.folders("m")[-1] == str(tmp_path / "c" / "m")
    assert found.folders("file_not_folder") == [] and found.folders("absent") == []
    assert found.paths() == [str(tmp_path / r) for r in ("b", "a", "c")]  # as given


def test_a_repository_registered_after_start_is_searched(tmp_path):
    write_model(tmp_path / "later", "py", PYTHON, files=("1/model.py",))
    found = Repositories([str(tmp_path / "start")])
    assert found.read("py").folders == ()
    found.register(str(tmp_path / "later"), None)
    model = found.read("py")
    assert model.folders == (str(tmp_path / "later" / "py"),)
    assert model.backend == "python" and model.config == {"backend": "python"}
    found.unregister(str(tmp_path / "later"))
    assert found.read("py").folders == ()


def test_a_name_mapping_gives_its_folder_alone(tmp_path):
    write_model(tmp_path / "start", "renamed", 'backend: "identity"\n')
    write_model(tmp_path / "extra", "sub", PYTHON)
    found = Repositories([str(tmp_path / "start")])
    found.register(str(tmp_path / "extra"), {"sub": "renamed"})
    # The core looks no further than the mapped folder, and a mapped folder
    # is not found under its own name.
    assert found.folders("renamed") == [str(tmp_path / "extra" / "sub")]
    assert found.read("renamed").backend == "python"
    assert found.folders("sub") == []
    found.register(str(tmp_path / "more"), {"gone": "missing"})
    assert found.folders("missing") == []  # mapped to a folder that is not there
    found.unregister(str(tmp_path / "extra"))
    assert found.folders("renamed") == [str(tmp_path / "start" / "renamed")]
    assert found.folders("sub") == []  # its repository is gone too


def test_a_startup_repository_can_be_unregistered(tmp_path):
    write_model(tmp_path / "start", "m")
    found = Repositories([str(tmp_path / "start")])
    found.unregister(str(tmp_path / "start"))
    assert found.folders("m") == [] and found.paths() == []


def test_repositories_of_options_with_their_model_config_name(tmp_path):
    write_model(tmp_path, "m", 'backend: "identity"\n')
    (tmp_path / "m" / "configs").mkdir()
    (tmp_path / "m" / "configs" / "alt.pbtxt").write_text(PYTHON)
    plain = repositories(Options(model_repository=[str(tmp_path)])).read("m")
    named = repositories(ServeOptions(model_repository=str(tmp_path),
                                      model_config_name="alt")).read("m")
    assert (plain.backend, plain.config_path) == ("identity", str(tmp_path / "m" / "config.pbtxt"))
    assert (named.backend, named.config_path) == (
        "python", str(tmp_path / "m" / "configs" / "alt.pbtxt"))


# ---- the configuration a load reads ------------------------------------------------------


def test_the_folder_configuration_read_once_with_what_is_wrong(repo, model):
    model("fine", 'platform: "ensemble"\n')
    model("bare", None, files=("1/model.onnx",))
    model("bad", "max_batch_size: [\n")
    (model("binary") / "config.pbtxt").write_bytes(b'name: "\xff"\n')
    found = Repositories([str(repo)])
    fine = found.read("fine")
    assert fine.ensemble and fine.problem is None and not fine.overridden
    bare = found.read("bare")
    assert (bare.config, bare.config_path, bare.backend) == ({}, None, "onnxruntime")
    bad = found.read("bad")
    assert bad.config is None and bad.config_path == str(repo / "bad" / "config.pbtxt")
    assert bad.problem.startswith(f"{bad.config_path} does not parse") and "line 1" in bad.problem
    assert bad.backends == (None,) and not bad.ensemble
    assert "is not UTF-8 text" in found.read("binary").problem


def test_the_load_config_override_replaces_the_folder_configuration(repo, model):
    model("m", 'backend: "identity"\n', files=("1/model.py",))
    found = Repositories([str(repo)])
    given = found.read("m", {"config": json.dumps({"max_batch_size": 0})})
    # No backend named: the core picks it from the repository folder's files.
    assert given.overridden and given.config == {"max_batch_size": 0}
    assert given.backend == "python" and given.config_path is None
    assert given.parameters == {"config": '{"max_batch_size": 0}'}
    for value, says in (({"a": 1}, "must be a string"), ("{", "not valid JSON ("),
                        ("[1]", "must be a JSON object, not '[1]'")):
        wrong = found.read("m", {"config": value})
        assert wrong.config is None and says in wrong.problem and wrong.backends == (None,)
    assert found.read("absent", {"config": "{}"}).backends == ()


def test_the_load_files_stand_for_the_folder(repo, model):
    model("m", 'backend: "identity"\n')
    found = Repositories([str(repo)])
    files = {"config": json.dumps({"max_batch_size": 0}), "file:1/model.py": b""}
    given = found.read("m", files)
    assert given.files and given.folders == () and given.backend == "python"
    # The core reads no folder for a load with files, and wants a config with them.
    alone = found.read("m", {"file:1/model.py": b""})
    assert alone.config is None and alone.backends == () and alone.problem is None
    deeper = found.read("m", {"config": "{}", "file:./1/sub/model.py": b"", "file:2/model.py": b""})
    assert deeper.backend is None  # version 1 holds a folder "sub", not model.py


def test_each_folder_has_its_backend(tmp_path):
    write_model(tmp_path / "a", "m", 'backend: "identity"\n')
    write_model(tmp_path / "b", "m", None, files=("1/model.py",))
    model = Repositories([str(tmp_path / "b"), str(tmp_path / "a")]).read("m")
    assert model.backends == ("identity", "python") and model.backend == "identity"
    assert model.config == {"backend": "identity"}


# ---- the backend the core picks ------------------------------------------------------------


@pytest.mark.parametrize("config, version, name, backend", [
    ({"backend": "identity", "platform": "onnxruntime_onnx"}, {"model.py": False}, "m",
     "identity"),
    ({"platform": "onnxruntime_onnx"}, None, "m", "onnxruntime"),
    ({"platform": "pytorch_libtorch"}, None, "m", "pytorch"),
    ({"platform": "tensorrt_plan"}, None, "m", "tensorrt"),
    ({"platform": "tensorflow_savedmodel"}, None, "m", "tensorflow"),
    ({"platform": "tensorflow_graphdef"}, None, "m", "tensorflow"),
    ({"platform": "ensemble"}, {"model.py": False}, "m", None),
    ({"platform": "pytorch_libtorch", "default_model_filename": "model.plan"}, None, "m",
     "tensorrt"),  # the core tries TensorRT first
    ({"default_model_filename": "model.py"}, None, "m", "python"),
    ({"default_model_filename": "model.xml"}, {"model.py": False}, "m", "openvino"),
    ({"default_model_filename": "model.graphdef"}, None, "m", "tensorflow"),
    ({"platform": "ensemble", "default_model_filename": "model.graphdef"}, None, "m", None),
    ({"default_model_filename": "custom.onnx"}, {"custom.onnx": False}, "m", None),
    ({}, {"model.py": False}, "m", "python"),
    ({}, {"model.py": False, "model.onnx": False}, "m", "onnxruntime"),
    ({}, {"model.py": False, "model.pt": False}, "m", "pytorch"),
    ({}, {"model.pt": True}, "m", None),  # a folder: not a TorchScript file
    ({}, {"model.savedmodel": True}, "m", "tensorflow"),
    ({}, {"model.savedmodel": False}, "m", None),
    ({}, {"model.plan": False}, "m", "tensorrt"),
    ({}, {"model.onnx": True}, "m", "onnxruntime"),  # a large model's folder
    ({}, {}, "m.identity", "identity"),  # the core's custom backend naming
    ({}, None, "m", None),
    ({"backend": 5}, {"model.py": False}, "m", None),
])
def test_backend_of(config, version, name, backend):
    assert backend_of(config, name, version) == backend


def test_the_first_version_folder_by_name_decides(repo, model):
    model("m", "", files=("1/model.onnx", "2/model.py"))
    model("n", "", files=(".hidden/model.py", "1/model.onnx"))
    model("configs", "", files=("configs/alt.pbtxt", "10/model.py", "9/model.onnx"))
    found = Repositories([str(repo)])
    assert [found.read(n).backend for n in ("m", "n", "configs")] == \
        ["onnxruntime", "python", "python"]
