"""The package reads a model's configuration from the file the core reads:
configs/<name>.pbtxt under a model config name (serve's --model-config-name)
where the model has one, else config.pbtxt."""

from __future__ import annotations

from tritonserver._control import python_stub
from tritonserver._control.config_text import config_file
from tritonserver._control.model_folder import Repositories, repositories
from tritonserver._options import ServeOptions


def _model(root, name, config, named=None):
    (root / name / "1").mkdir(parents=True)
    (root / name / "config.pbtxt").write_text(config)
    if named is not None:
        (root / name / "configs").mkdir()
        (root / name / "configs" / "alt.pbtxt").write_text(named)
    return root / name


def test_the_named_file_where_there_is_one(tmp_path):
    both = _model(tmp_path, "both", 'backend: "identity"', 'platform: "ensemble"')
    plain = _model(tmp_path, "plain", 'backend: "identity"')
    assert config_file(str(both), "alt") == str(both / "configs" / "alt.pbtxt")
    assert config_file(str(both), None) == str(both / "config.pbtxt")
    assert config_file(str(plain), "alt") == str(plain / "config.pbtxt")
    assert Repositories([str(tmp_path)], "alt").read("both").ensemble
    assert not Repositories([str(tmp_path)]).read("both").ensemble


def test_a_python_model_is_told_from_the_named_config(tmp_path):
    _model(tmp_path, "m", 'backend: "identity"', 'backend: "python"')
    named = ServeOptions(model_repository=str(tmp_path), model_config_name="alt")
    plain = ServeOptions(model_repository=str(tmp_path))
    assert python_stub.runs_on_stub(repositories(named).read("m"), "stub")
    assert not python_stub.runs_on_stub(repositories(plain).read("m"), "stub")
