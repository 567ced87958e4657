"""Where the reference page is silent, NVIDIA's package decides: what its
programs and tests rely on works the same here (models by bare name,
default_memory_allocators, TypeError for a wrong option type, enums that
print their names, Server._ptr), and a CPU-only machine starts quietly."""

from __future__ import annotations

import enum
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tritonserver
from conftest import TESTS_DIR, run_python, start_server, stop_within
from tritonserver import MemoryBuffer, MemoryType, _gpu

# ---- models() answers a bare name -------------------------------------------------------


def test_models_answers_bare_names(server):
    models = server.models()
    assert ("identity_fp32", 1) in models and "identity_fp32" in models
    assert "no_such_model" not in models and ("identity_fp32", 99) not in models
    model = models["identity_fp32"]
    assert (model.name, model.version) == ("identity_fp32", -1)
    out = next(model.infer(inputs={"INPUT0": np.ones(2, np.float32)}))
    assert np.from_dlpack(out.outputs["OUTPUT0"]).tolist() == [1.0, 1.0]
    assert models.get("identity_fp32").name == "identity_fp32"
    assert models.get("no_such_model") is None and models.get(("x", 1), "d") == "d"
    assert all(isinstance(k, tuple) and len(k) == 2 for k in models)  # keys as before
    assert models[("identity_fp32", 1)].state == "READY"
    with pytest.raises(KeyError, match="no_such_model"):
        models["no_such_model"]


# ---- default_memory_allocators ----------------------------------------------------------


class Counting(tritonserver.MemoryAllocator):
    """Host memory, counting the calls."""

    def __init__(self):
        self.calls = []

    def allocate(self, size, memory_type, memory_type_id):
        self.calls.append((size, MemoryType(memory_type)))
        array = np.empty(size, np.uint8)
        return MemoryBuffer(array.ctypes.data, MemoryType.CPU, 0, size, array)


@pytest.fixture
def defaults():
    """tritonserver.default_memory_allocators, restored after the test."""
    saved = dict(tritonserver.default_memory_allocators)
    yield tritonserver.default_memory_allocators
    tritonserver.default_memory_allocators.clear()
    tritonserver.default_memory_allocators.update(saved)
    assert tritonserver.default_memory_allocators.as_shipped


def test_default_allocators_as_shipped():
    defaults = tritonserver.default_memory_allocators
    assert MemoryType.CPU in defaults
    assert (MemoryType.GPU in defaults) == (_gpu.present() and _has("cupy"))
    buffer = defaults[MemoryType.CPU].allocate(200, MemoryType.CPU, 0)
    assert (buffer.size, buffer.memory_type, buffer.memory_type_id) == (200, MemoryType.CPU, 0)
    assert isinstance(buffer.owner, np.ndarray) and buffer.owner.ctypes.data == buffer.data_ptr
    tensor = tritonserver.Tensor(tritonserver.DataType.FP32, [50], buffer)
    assert np.from_dlpack(tensor).ctypes.data == buffer.data_ptr


def test_a_replaced_cpu_entry_allocates_every_default_output(server, defaults):
    counting = Counting()
    defaults[MemoryType.CPU] = counting
    x = np.arange(5, dtype=np.float32)
    out = next(server.model("identity_fp32").infer(inputs={"INPUT0": x}))
    assert counting.calls == [(20, MemoryType.CPU)]
    np.testing.assert_array_equal(np.from_dlpack(out.outputs["OUTPUT0"]), x)
    request = server.model("add_sub_fp32").create_request(inputs={"INPUT0": x, "INPUT1": x})
    next(server.model("add_sub_fp32").infer(request))
    assert len(counting.calls) == 3
    del defaults[MemoryType.CPU]
    defaults[MemoryType.CPU] = tritonserver._memory._SHIPPED[MemoryType.CPU]
    next(server.model("identity_fp32").infer(inputs={"INPUT0": x}))
    assert len(counting.calls) == 3  # back to the binding's host memory


def test_output_memory_type_missing_from_the_defaults_is_invalid(server, defaults):
    defaults.pop(MemoryType.GPU, None)
    with pytest.raises(tritonserver.InvalidArgumentError, match="default_memory_allocators"):
        server.model("identity_fp32").infer(inputs={"INPUT0": np.ones(3, np.float32)},
                                            output_memory_type="gpu")
    counting = Counting()
    defaults[MemoryType.GPU] = counting  # a program's own GPU entry is used for GPU
    out = next(server.model("identity_fp32").infer(inputs={"INPUT0": np.ones(3, np.float32)},
                                                   output_memory_type="gpu:0"))
    assert counting.calls == [(12, MemoryType.GPU)]
    assert np.from_dlpack(out.outputs["OUTPUT0"]).tolist() == [1.0, 1.0, 1.0]


def test_no_cpu_entry_fails_the_request_not_the_server(server, defaults):
    defaults.clear()
    with pytest.raises(tritonserver.TritonError, match="default_memory_allocators"):
        list(server.model("identity_fp32").infer(inputs={"INPUT0": np.ones(3, np.float32)}))
    defaults[MemoryType.CPU] = Counting()
    out = next(server.model("identity_fp32").infer(inputs={"INPUT0": np.ones(1, np.float32)}))
    assert np.from_dlpack(out.outputs["OUTPUT0"]).tolist() == [1.0]
    assert server.live()


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.mark.skipif(not (_gpu.present() and _has("cupy")), reason="needs a GPU and cupy")
def test_gpu_outputs_from_the_default_gpu_allocator(server):
    out = next(server.model("identity_fp32").infer(inputs={"INPUT0": np.ones(3, np.float32)},
                                                   output_memory_type="gpu"))
    assert out.outputs["OUTPUT0"].memory_type == MemoryType.GPU


# ---- a wrong option type is a TypeError ------------------------------------------------


@pytest.mark.parametrize("options", [
    {"server_id": 1}, {"model_repository": 1}, {"model_repository": None},
    {"exit_timeout": "30"}, {"log_verbose": 1.5}, {"strict_model_config": "yes"},
    {"model_control_mode": "explicit"}, {"startup_models": ["a", 2]},
    {"backend_configuration": {"python": "shm-default-byte-size=1"}},
], ids=lambda o: next(iter(o)))
def test_wrong_option_types_raise_type_errors_at_start(example_repo, options):
    server = tritonserver.Server(**{"model_repository": example_repo, **options})  # accepted
    with pytest.raises(TypeError) as caught:
        server.start()
    assert isinstance(caught.value, tritonserver.InvalidArgumentError)
    assert f"Options.{next(iter(options))}" in str(caught.value)


@pytest.mark.parametrize("options", [
    {"exit_timeout": -1}, {"model_control_mode": 7}, {"model_repository": []},
    {"model_load_device_limits": [tritonserver.ModelLoadDeviceLimit(
        tritonserver.InstanceGroupKind.CPU, 0, 1.5)]},
], ids=lambda o: next(iter(o)))
def test_wrong_option_values_stay_value_errors(example_repo, options):
    server = tritonserver.Server(**{"model_repository": example_repo, **options})
    with pytest.raises(tritonserver.InvalidArgumentError) as caught:
        server.start()
    assert isinstance(caught.value, ValueError) and not isinstance(caught.value, TypeError)


def test_unknown_options_are_type_errors():
    with pytest.raises(TypeError) as caught:
        tritonserver.Server(model_repositry="/models")
    assert isinstance(caught.value, tritonserver.InvalidArgumentError)
    with pytest.raises(TypeError):
        tritonserver.Server("/models")  # type: ignore[arg-type]


# ---- enums print their names ------------------------------------------------------------

PUBLIC_ENUMS = [getattr(tritonserver, n) for n in tritonserver.__all__
                if isinstance(getattr(tritonserver, n), type)
                and issubclass(getattr(tritonserver, n), enum.Enum)]


@pytest.mark.parametrize("cls", PUBLIC_ENUMS, ids=lambda c: c.__name__)
def test_every_public_enum_prints_names(cls):
    for member in cls:
        text = f"{cls.__name__}.{member.name}"
        assert str(member) == text and f"{member}" == text and "%s" % member == text
        assert format(member, "d") == str(int(member))  # a number when asked for one


def test_flags_print_the_names_they_hold(server):
    decoupled = server.model("repeat_int32").transaction_properties()
    assert str(decoupled) == "ModelTxnPropertyFlag.DECOUPLED"
    both = tritonserver.ModelTxnPropertyFlag(3)
    assert str(both) == "ModelTxnPropertyFlag.ONE_TO_ONE|DECOUPLED"
    assert str(tritonserver.ModelBatchFlag(0)) == "ModelBatchFlag.0"


def test_enums_print_names_on_every_installed_python():
    """The rule is ours, not the interpreter's: the same text on 3.9 to 3.13
    (an enum class built as the package builds them, on each Python found)."""
    code = ("import enum, sys; sys.path.insert(0, sys.argv[1]);"
            "from _enum_names import named;"
            "F = named(enum.IntFlag('F', {'A': 1, 'B': 2})); E = named(enum.IntEnum('E', {'X': 3}));"
            "print(str(E.X), f'{E.X}', str(F(3)), str(F(0)), format(E.X, 'd'))")
    here = os.path.dirname(os.path.abspath(tritonserver._enums.__file__))
    tried = 0
    for python in _installed_pythons():
        done = subprocess.run([python, "-c", code, here], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == ["E.X", "E.X", "F.A|B", "F.0", "3"], python
        tried += 1
    assert tried >= 1


def _installed_pythons() -> list[str]:
    found = [sys.executable]
    root = os.path.expanduser("~/.pyenv/versions")
    if os.path.isdir(root):
        for version in sorted(os.listdir(root)):
            python = os.path.join(root, version, "bin", "python3")
            if os.path.isfile(python) and version.split(".")[:2] >= ["3", "9"]:
                found.append(python)
    return found


# ---- Server._ptr ------------------------------------------------------------------------


def test_ptr_is_the_core_server_address(server):
    address = server._ptr()
    assert isinstance(address, int) and address != 0
    assert address == server._ptr()


# ---- a quiet start without a GPU --------------------------------------------------------


@pytest.mark.skipif(_gpu.present(), reason="this machine has a GPU")
def test_cpu_only_start_prints_no_gpu_noise(example_repo):
    code = ("import tritonserver as t;"
            f"s = t.Server(model_repository={example_repo!r}, exit_timeout=10,"
            "model_control_mode=t.ModelControlMode.EXPLICIT, log_warn=True).start("
            "wait_until_ready=True); print('LIVE', s.live()); s.stop()")
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert "LIVE True" in done.stdout
    for noise in ("NVML", "DCGM", "pinned memory pool will not be available"):
        assert noise not in done.stdout + done.stderr


@pytest.mark.parametrize("visible", ["", "-1"])
def test_hidden_gpus_count_as_none(monkeypatch, visible):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    _gpu.present.cache_clear()
    try:
        assert not _gpu.present()
    finally:
        monkeypatch.undo()
        _gpu.present.cache_clear()


# ---- the python-backend refusal points at inprocess -------------------------------------


def test_python_backend_refusal_says_how_to_run_in_process(monkeypatch):
    from tritonserver._control import python_stub as _runtime
    from tritonserver._core.stub_env import StubEnv

    server = start_server(model_repository=os.path.join(TESTS_DIR, "models"),
                          model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    try:
        # What a Python 3.13 with numpy 2 gets from the stub environment.
        refusal = StubEnv(False, reason="python backend models are disabled: numpy 2.")
        monkeypatch.setattr(_runtime, "_stub_environment", lambda core: refusal)
        with pytest.raises(tritonserver.UnsupportedError) as caught:
            server.load("python_affine")
        message = str(caught.value)
        assert "numpy 2" in message
        assert 'python_backend="inprocess"' in message and "--python-backend inprocess" in message
        # A model given in the load call: its config there decides, not the disk's.
        io = {"input": [{"name": "X", "data_type": "TYPE_FP32", "dims": [-1]}],
              "output": [{"name": "Y", "data_type": "TYPE_FP32", "dims": [-1]}]}
        model_py = b"class TritonPythonModel:\n    pass\n"
        for config in ({"backend": "python", **io}, io):
            with pytest.raises(tritonserver.UnsupportedError, match="inprocess"):
                server.load("given", {"config": json.dumps(config), "file:1/model.py": model_py})
        with pytest.raises(tritonserver.UnsupportedError, match="inprocess"):
            server.load("python_affine", {"config": json.dumps({"backend": "python"})})
        # Another backend named by the load call's config is not the stub's business.
        identity = {"backend": "identity", "max_batch_size": 0,
                    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
                    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}]}
        assert server.load("given", {"config": json.dumps(identity), "file:1/README": b"no file needed"}).ready()
        assert server.live()
    finally:
        stop_within(server)


def test_python_backend_refusal_reads_the_repository_as_the_core_does(monkeypatch, tmp_path):
    """On disk, as in a load call: a config.pbtxt naming no backend and no
    platform, beside a model.py, runs on the python backend (the core fills
    the backend in), so it is refused too; one naming another backend is not."""
    from tritonserver._control import python_stub as _runtime
    from tritonserver._control.model_folder import Repositories
    from tritonserver._core.stub_env import StubEnv

    io = ('input [{ name: "X" data_type: TYPE_FP32 dims: [-1] }]\n'
          'output [{ name: "Y" data_type: TYPE_FP32 dims: [-1] }]\n')
    for name, header in (("unnamed", ""), ("named", 'backend: "python"\n'),
                         ("other", 'backend: "identity"\n')):
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
        (tmp_path / name / "config.pbtxt").write_text(header + io)
    repositories = Repositories([str(tmp_path)])
    assert [_runtime.runs_on_stub(repositories.read(n), "stub")
            for n in ("unnamed", "named", "other")] == [True, True, False]
    # In-process (the server's option), none of them needs the stub.
    assert not any(_runtime.runs_on_stub(repositories.read(n), "inprocess")
                   for n in ("unnamed", "named", "other"))
    refusal = StubEnv(False, reason="python backend models are disabled: numpy 2.")
    monkeypatch.setattr(_runtime, "_stub_environment", lambda core: refusal)
    server = start_server(model_repository=str(tmp_path),
                          model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    try:
        for name in ("unnamed", "named"):
            with pytest.raises(tritonserver.UnsupportedError, match="inprocess"):
                server.load(name)
        assert server.live()
    finally:
        stop_within(server)


def test_python_backend_refusal_reads_repositories_registered_after_start(monkeypatch, tmp_path):
    """A repository registered on the running server is searched as those it
    started with: a python-backend model there is refused too, by its folder
    name and by the name a name mapping gives it."""
    from tritonserver._control import python_stub as _runtime
    from tritonserver._core.stub_env import StubEnv

    config = ('backend: "python"\n'
              'input [{ name: "X" data_type: TYPE_FP32 dims: [-1] }]\n'
              'output [{ name: "Y" data_type: TYPE_FP32 dims: [-1] }]\n')
    for folder in (tmp_path / "later" / "py_later", tmp_path / "mapped" / "py_folder"):
        (folder / "1").mkdir(parents=True)
        (folder / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
        (folder / "config.pbtxt").write_text(config)
    (tmp_path / "start").mkdir()
    refusal = StubEnv(False, reason="python backend models are disabled: numpy 2.")
    monkeypatch.setattr(_runtime, "_stub_environment", lambda core: refusal)
    server = start_server(model_repository=str(tmp_path / "start"),
                          model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    try:
        server.register_model_repository(str(tmp_path / "later"))
        server.register_model_repository(str(tmp_path / "mapped"), {"py_folder": "py_mapped"})
        for name in ("py_later", "py_mapped"):
            with pytest.raises(tritonserver.UnsupportedError, match="inprocess"):
                server.load(name)
        assert server.live()
        assert all(model.state != "READY" for model in server.models().values())
    finally:
        stop_within(server)
