"""Backends found by entry point (tritonserver._framework._plugins): the
group read from distributions' metadata, one name claimed twice, the API
version check, discovery switched off, the backend folder made for plugin
names, the public API module, and `python -m tritonserver backends`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tritonserver import InvalidArgumentError, UnavailableError
from tritonserver._framework import _plugins
from unit.plugin_dists import DOUBLER, make_distribution


@pytest.fixture
def on_path(monkeypatch):
    """Puts folders on sys.path for the test (and forgets what was read)."""
    def add(folder: Path) -> None:
        monkeypatch.syspath_prepend(str(folder))
        _plugins.refresh()
    yield add
    _plugins.refresh()


def test_own_backends_are_entry_points_of_the_package():
    found = _plugins.scan(discovery=False)
    assert {n: [e.distribution for e in found[n]] for n in ("onnxruntime", "pytorch", "openvino")}\
        == {"onnxruntime": ["tritonserver-embedded"], "pytorch": ["tritonserver-embedded"],
            "openvino": ["tritonserver-embedded"]}
    assert found["onnxruntime"][0].value == "tritonserver._onnx:Model"
    cls = _plugins.backend_class("onnxruntime")
    assert cls is not None and cls.api_version == _plugins.API_VERSION
    assert cls.requires == ("onnxruntime",)


def test_a_distribution_is_found_and_its_class_imported_only_when_asked(tmp_path, on_path):
    folder = make_distribution(tmp_path / "a", "plugin-a", "1.2", {"doubler": "plug_a:Doubler"},
                               {"plug_a": DOUBLER.format(version="1.0")})
    on_path(folder)
    entry = _plugins.resolve("doubler")
    assert entry == _plugins.Entry("doubler", "plug_a:Doubler", "plugin-a", "1.2")
    assert "plug_a" not in sys.modules  # read from metadata, nothing imported
    cls = _plugins.backend_class("doubler")
    assert cls is not None and cls.__name__ == "Doubler" and "plug_a" in sys.modules
    assert _plugins.backend_class("nobody") is None  # an inprocess Python model
    sys.modules.pop("plug_a", None)


def test_two_distributions_claiming_one_name_fail_naming_both(tmp_path, on_path):
    on_path(make_distribution(tmp_path / "a", "plugin-a", "1.0", {"doubler": "dup_a:Doubler"},
                              {"dup_a": DOUBLER.format(version="1.0")}))
    on_path(make_distribution(tmp_path / "b", "plugin-b", "2.0", {"doubler": "dup_b:Doubler"},
                              {"dup_b": DOUBLER.format(version="1.0")}))
    with pytest.raises(InvalidArgumentError) as e:
        _plugins.backend_class("doubler")
    text = str(e.value)
    assert "backend 'doubler' is declared by 2 distributions" in text
    assert "plugin-a 1.0 (dup_a:Doubler)" in text and "plugin-b 2.0 (dup_b:Doubler)" in text
    rows = [r for r in _plugins.describe() if r["backend"] == "doubler"]
    assert len(rows) == 2 and all(not r["loads"] and "2 distributions" in r["problem"]
                                  for r in rows)


def test_a_plugin_claiming_a_package_backend_is_a_duplicate(tmp_path, on_path):
    on_path(make_distribution(tmp_path / "a", "rogue", "1.0", {"onnxruntime": "rogue:Doubler"},
                              {"rogue": DOUBLER.format(version="1.0")}))
    with pytest.raises(InvalidArgumentError, match="tritonserver-embedded .* and rogue 1.0|"
                                                   "rogue 1.0 .* and tritonserver-embedded"):
        _plugins.backend_class("onnxruntime")


@pytest.mark.parametrize("declared, error, text", [
    ("2.0", UnavailableError, "needs backend API 2.0, but this tritonserver-embedded provides "
                              "1.0 (it runs backends written for 1.0 to 1.0)"),
    ("1.9", UnavailableError, "needs backend API 1.9"),
    ("0.9", UnavailableError, "needs backend API 0.9"),
    ("one", InvalidArgumentError, "declares no backend API version: set api_version"),
])
def test_the_api_version_is_checked(tmp_path, on_path, declared, error, text):
    module = f"ver_{declared.replace('.', '_')}"
    on_path(make_distribution(tmp_path / "v", "versioned", "3.0", {"doubler": f"{module}:Doubler"},
                              {module: DOUBLER.format(version=declared)}))
    with pytest.raises(error) as e:
        _plugins.backend_class("doubler")
    assert text in str(e.value) and f"({module}:Doubler from versioned 3.0)" in str(e.value)


def test_a_class_that_is_not_a_backend_or_a_missing_module(tmp_path, on_path):
    on_path(make_distribution(tmp_path / "x", "broken", "1.0",
                              {"notcls": "broken_mod:NotABackend", "gone": "no_such_module:X"},
                              {"broken_mod": "class NotABackend:\n    api_version = '1.0'\n"}))
    with pytest.raises(InvalidArgumentError, match="is not a backend class"):
        _plugins.backend_class("notcls")
    with pytest.raises(UnavailableError, match="could not be imported: No module named "
                                               "'no_such_module'"):
        _plugins.backend_class("gone")


def test_discovery_off_reads_only_the_package(tmp_path, on_path, monkeypatch):
    on_path(make_distribution(tmp_path / "a", "plugin-a", "1.0", {"doubler": "off_a:Doubler"},
                              {"off_a": DOUBLER.format(version="1.0")}))
    assert _plugins.resolve("doubler") is not None
    monkeypatch.setenv(_plugins.DISCOVERY_ENV, "0")
    assert _plugins.resolve("doubler") is None
    assert _plugins.resolve("onnxruntime").distribution == "tritonserver-embedded"


def test_the_backend_folder_links_each_plugin_name_to_the_forwarder(tmp_path, on_path,
                                                                    monkeypatch):
    package = tmp_path / "backends"
    for name in ("onnxruntime", "pytorch", "openvino", "identity"):
        (package / name).mkdir(parents=True)
        (package / name / f"libtriton_{name}.so").write_bytes(b"library " + name.encode())
    monkeypatch.setenv(_plugins.DISCOVERY_ENV, "0")
    assert _plugins.backends_dir(str(package)) == str(package)  # no plugin: the folder itself
    monkeypatch.delenv(_plugins.DISCOVERY_ENV)
    on_path(make_distribution(tmp_path / "a", "plugin-a", "1.0",
                              {"doubler": "dir_a:Doubler", "identity": "dir_a:Doubler"},
                              {"dir_a": DOUBLER.format(version="1.0")}))
    made = Path(_plugins.backends_dir(str(package)))
    assert made != package and {"doubler", "identity", "onnxruntime", "pytorch", "openvino"} <= \
        set(os.listdir(made))
    library = made / "doubler" / "libtriton_doubler.so"
    assert os.path.realpath(library) == os.path.realpath(package / "onnxruntime" /
                                                         "libtriton_onnxruntime.so")
    assert os.path.realpath(made / "identity") == os.path.realpath(package / "identity")
    assert _plugins.backends_dir(str(package)) == str(made)  # the same contents: reused


def test_the_public_api_module():
    import tritonserver.backend_api as api

    assert api.API_VERSION == _plugins.API_VERSION == "1.0"
    assert api.ENTRY_POINT_GROUP == "tritonserver.backends"
    assert all(not name.startswith("_") and hasattr(api, name) for name in api.__all__)
    assert issubclass(api.Backend, _plugins_model())
    assert api.Backend.complete("m", 1, {}, "", {}) is None


def _plugins_model():
    from tritonserver._framework._model import FrameworkModel

    return FrameworkModel


def test_python_m_tritonserver_backends_lists_what_is_installed(tmp_path):
    folder = make_distribution(tmp_path / "a", "plugin-a", "1.0",
                               {"doubler": "cli_a:Doubler", "needy": "cli_a:Needy"},
                               {"cli_a": DOUBLER.format(version="1.0") +
                                "\n\nclass Needy(Doubler):\n    requires = ('no_such_dep',)\n"})
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(folder)] + sys.path))
    run = subprocess.run([sys.executable, "-m", "tritonserver", "backends", "--json"],
                         capture_output=True, text=True, env=env, timeout=120)
    rows = {r["backend"]: r for r in json.loads(run.stdout)}
    assert rows["doubler"]["distribution"] == "plugin-a" and rows["doubler"]["loads"]
    assert rows["doubler"]["dependencies_import"] and rows["doubler"]["api_version"] == "1.0"
    assert rows["needy"]["loads"] and not rows["needy"]["dependencies_import"]
    assert "no_such_dep: ModuleNotFoundError" in rows["needy"]["dependencies"][0]
    assert rows["onnxruntime"]["distribution"] == "tritonserver-embedded"
    text = subprocess.run([sys.executable, "-m", "tritonserver", "backends"], capture_output=True,
                          text=True, env=env, timeout=120).stdout
    assert "doubler: plugin-a 1.0 (cli_a:Doubler), API 1.0: ok" in text
    assert "needy: plugin-a 1.0 (cli_a:Needy), API 1.0: dependencies missing" in text


def test_a_backend_folder_someone_else_can_change_is_not_used(tmp_path, on_path, monkeypatch):
    package = tmp_path / "backends"
    for name in ("onnxruntime", "pytorch", "openvino"):
        (package / name).mkdir(parents=True)
        (package / name / f"libtriton_{name}.so").write_bytes(b"library")
    monkeypatch.setattr(_plugins.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    on_path(make_distribution(tmp_path / "a", "plugin-a", "1.0", {"doubler": "own_a:Doubler"},
                              {"own_a": DOUBLER.format(version="1.0")}))
    first = _plugins.backends_dir(str(package))
    shutil.rmtree(first)
    os.makedirs(os.path.join(first, "doubler"))  # the same name, made by "someone" and left
    os.chmod(first, 0o777)                       # writable by all
    second = _plugins.backends_dir(str(package))
    assert second != first and os.path.islink(os.path.join(second, "doubler",
                                                           "libtriton_doubler.so"))
    assert os.listdir(first) == ["doubler"]


def test_a_distribution_with_broken_metadata_is_skipped(tmp_path, on_path, caplog):
    folder = make_distribution(tmp_path / "a", "plugin-a", "1.0", {"doubler": "brk_a:Doubler"},
                               {"brk_a": DOUBLER.format(version="1.0")})
    broken = folder / "broken-1.0.dist-info"
    broken.mkdir()
    (broken / "METADATA").write_text("Metadata-Version: 2.1\nName: broken\nVersion: 1.0\n")
    (broken / "entry_points.txt").write_text("[tritonserver.backends]\na line without a value\n")
    on_path(folder)
    assert _plugins.resolve("doubler").distribution == "plugin-a"
    assert "skipping a distribution whose metadata cannot be read" in caplog.text


def test_no_plugin_takes_the_inprocess_backend(tmp_path, on_path):
    on_path(make_distribution(tmp_path / "a", "hijack", "1.0", {"inprocess": "hij_a:Doubler"},
                              {"hij_a": DOUBLER.format(version="1.0")}))
    assert _plugins.backend_class("inprocess") is None
    assert "inprocess" not in _plugins.plugin_names(None)
