"""Installed distributions made on the spot for the plugin tests: a
``<name>-<version>.dist-info`` folder (METADATA, entry_points.txt) and the
modules it declares, in a folder that goes on sys.path."""

from __future__ import annotations

from pathlib import Path


def make_distribution(folder: Path, name: str, version: str, entries: dict[str, str],
                      modules: dict[str, str]) -> Path:
    """`entries`: backend name -> "module:Class" (group tritonserver.backends);
    `modules`: module name -> its source. Returns `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8")
    lines = ["[tritonserver.backends]"] + [f"{k} = {v}" for k, v in entries.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for module, source in modules.items():
        (folder / f"{module}.py").write_text(source, encoding="utf-8")
    return folder


# A backend that doubles its input INPUT into OUTPUT; {version} is its api_version.
DOUBLER = '''
from tritonserver.backend_api import Backend


class Doubler(Backend):
    api_version = "{version}"
    requires = ("numpy",)

    def load(self):
        self.factor = float(self.parameters.get("factor", "2"))

    def open_instance(self, instance):
        return self.factor

    def run(self, runner, names, feed):
        return [feed["INPUT"] * runner for _ in names]
'''
