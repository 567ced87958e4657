"""The SageMaker frontend's pieces that need no server, each against
Triton's ``src/sagemaker_server.cc`` and ``command_line_parser.cc``: the
json-header-size of the binary Content-Type (its texts), the out-of-memory
texts that make a multi-model error a 507, where a load's url puts the
model (the /opt/ml/models form, the ensemble, the /dev refusal), and
serve's SageMaker flags (the safe port range and the port checks, with the
executable's texts)."""

from __future__ import annotations

import pathlib
import shutil
import tempfile

import pytest

from tritonserver import AlreadyExistsError, InternalError, InvalidArgumentError
from tritonserver._cli.sagemaker_flags import check_ports, safe_port_range
from tritonserver._cli.serve_flags import build_parser
from tritonserver.frontends.sagemaker import models
from tritonserver.frontends.sagemaker.wire import (BINARY_MIME, json_header_size,
                                                   multi_model_status, out_of_memory)

MIME = BINARY_MIME.encode()


# ---- json-header-size --------------------------------------------------------------------


@pytest.mark.parametrize("content_type, size", [
    (None, 20), (b"application/json", 20), (b"text/plain", 20),
    (MIME + b"12", 12), (MIME + b"0", 0), (MIME + b"20", 20),
    (MIME + b" +7", 7), (MIME + b"12;charset=utf-8", 12),  # std::stoi stops at the digits
])
def test_json_header_size(content_type, size):
    assert json_header_size(content_type, 20) == size


@pytest.mark.parametrize("rest, message", [
    (b"abc", "Unable to parse inference header size, got: abc"),
    (b"", "Unable to parse inference header size, got: "),
    (b"99999999999", "Unable to parse inference header size, value is out of range, got: "
                     "99999999999"),
    (b"-1", "inference header size should be in range (0, 20), got: -1"),
    (b"21", "inference header size should be in range (0, 20), got: 21"),
])
def test_bad_json_header_sizes_get_tritons_texts(rest, message):
    with pytest.raises(InvalidArgumentError) as e:
        json_header_size(MIME + rest, 20)
    assert str(e.value) == message


def test_the_binary_type_must_come_first():
    content_type = b"text/plain, " + MIME + b"4"
    with pytest.raises(InvalidArgumentError) as e:
        json_header_size(content_type, 20)
    assert str(e.value) == (f"expect MIME type for binary data starts with '{BINARY_MIME}', "
                            f"got: {content_type.decode()}")


# ---- Statuses of the multi-model endpoints -----------------------------------------------


@pytest.mark.parametrize("text, oom", [
    ("CUDA out of memory. Tried to allocate 2.00 GiB", True),
    ("model 'm': initialize raised MemoryError: weights", True),
    ("CUBLAS_STATUS_ALLOC_FAILED", True), ("No space left on device", True),
    ("load failed: OOM", True), ("unexpected shape for input 'INPUT0'", False),
])
def test_out_of_memory_texts(text, oom):
    assert out_of_memory(text) is oom
    assert multi_model_status(InternalError(text)) == (507 if oom else 400)


def test_a_taken_name_is_409():
    assert multi_model_status(AlreadyExistsError("model repository '/r' has already been "
                                                 "registered")) == 409


# ---- Where a load's url puts the model -----------------------------------------------------


@pytest.fixture
def tmp_path(tmp_path):
    """pytest's tmp_path, or a folder in /tmp where it lies under /dev (a
    TMPDIR on /dev/shm), /proc or /sys: SageMaker's service refuses urls
    there before reading them, as Triton's does."""
    try:
        models.check_not_system(str(tmp_path))
    except models.SystemFolderError:
        folder = tempfile.mkdtemp(prefix="sagemaker-tests-", dir="/tmp")
        try:
            yield pathlib.Path(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    yield tmp_path


def test_a_url_holding_a_config_is_the_model_and_its_parent_the_repository(tmp_path):
    model = tmp_path / "models" / "abc.12_x" / "model"
    model.mkdir(parents=True)
    (model / "config.pbtxt").write_text('backend: "identity"\n')
    root = str(tmp_path / "models")
    assert models.placement(str(model), root) == models.Placement(
        str(tmp_path / "models" / "abc.12_x"), "model")
    # Trailing slashes and dot segments are normalized first.
    assert models.placement(str(model) + "/", root).folder == "model"
    assert models.placement(f"{root}/other/../abc.12_x/model", root).folder == "model"


def test_a_url_of_model_folders_is_the_repository_and_the_ensemble_is_the_model(tmp_path):
    root = tmp_path / "models"
    url = root / "h" / "model"
    for name, config in (("a_step", 'backend: "identity"\n'),
                         ("b_pipeline", 'platform: "ensemble"\n'),
                         ("c_step", 'backend: "identity"\n')):
        (url / name).mkdir(parents=True)
        (url / name / "config.pbtxt").write_text(config)
    (url / "notes.txt").write_text("a file is no model")
    assert models.placement(str(url), str(root)) == models.Placement(str(url), "b_pipeline")
    # Without an ensemble: the last folder (the only one, in SageMaker's archives).
    (url / "b_pipeline" / "config.pbtxt").write_text('platform:"onnxruntime_onnx"\n')
    assert models.model_folder(str(url)) == "c_step"
    # `platform:"ensemble"` (no space) is an ensemble too, as Triton's pattern reads it.
    (url / "a_step" / "config.pbtxt").write_text('platform:"ensemble"\n')
    assert models.model_folder(str(url)) == "a_step"
    # An optional sub-folder of model/.
    sub = url / "a_step"
    assert models.placement(str(sub), str(root)) == models.Placement(str(root / "h"), "model")


@pytest.mark.parametrize("url", [
    "/tmp/elsewhere/model", "{root}/h/not_model", "{root}/h-yphen/model", "{root}/model",
    "{root}/h/model/a/b", "relative/model",
])
def test_other_urls_are_refused_with_tritons_text(tmp_path, url):
    root = str(tmp_path / "models")
    url = url.format(root=root)
    with pytest.raises(InvalidArgumentError) as e:
        models.placement(url, root)
    assert str(e.value) == (f"Invalid \"url\" '{url}': expected a path of the form "
                            f"{root}/<hash>/model[/<subdir>]")


def test_the_default_root_is_sagemakers():
    with pytest.raises(InvalidArgumentError) as e:
        models.placement("/srv/models/h/model")
    assert str(e.value) == ("Invalid \"url\" '/srv/models/h/model': expected a path of the "
                            "form /opt/ml/models/<hash>/model[/<subdir>]")


@pytest.mark.parametrize("url", ["/dev/shm/x", "/dev/", "/dev", "/proc/self/root/model",
                                 "/sys/kernel", "/tmp/../dev/null", "//proc/1"])
def test_system_folders_are_refused(url):
    with pytest.raises(models.SystemFolderError):
        models.check_not_system(url)


@pytest.mark.parametrize("url", ["/device/x", "/devices", "/tmp/dev/x", "/opt/ml/models/h/model"])
def test_names_that_merely_start_alike_are_not_system_folders(url):
    assert models.check_not_system(url) == url


# ---- serve's flags ----------------------------------------------------------------------


def parse(*argv: str):
    return build_parser().parse_args(["--model-repository=/r", *argv])


def test_the_flags_parse_and_default_as_documented():
    args = parse()
    assert (args.allow_sagemaker, args.sagemaker_port, args.sagemaker_safe_port_range,
            args.sagemaker_thread_count) == (False, 8080, None, 1)
    args = parse("--allow-sagemaker", "--sagemaker-port=9090",
                 "--sagemaker-safe-port-range=8000-8002", "--sagemaker-thread-count", "8")
    assert (args.allow_sagemaker, args.sagemaker_port, args.sagemaker_safe_port_range,
            args.sagemaker_thread_count) == (True, 9090, "8000-8002", 8)
    assert parse("--allow-sagemaker=false").allow_sagemaker is False
    check_ports(parse("--allow-sagemaker=true"))  # 8000-8002 and 8080: no clash


@pytest.mark.parametrize("text, message", [
    ("8000", "Cannot parse pair option due to incorrect number of inputs.--<pair option> "
             "argument requires format <first>-<second>. Found: 8000"),
    ("a-9", "Invalid option value. Got a"),
    ("-9", "Invalid option value. Got "),
    ("1-99999999999", "Provided option value is out of bound. Got 99999999999"),
])
def test_bad_safe_port_ranges_get_the_executables_texts(text, message):
    with pytest.raises(ValueError) as e:
        safe_port_range(text)
    assert str(e.value) == message
    with pytest.raises(ValueError):  # read whether or not SageMaker is served
        check_ports(parse(f"--sagemaker-safe-port-range={text}"))


def test_safe_port_range_parses_as_stoi_does():
    assert safe_port_range("8000-8002") == (8000, 8002)
    assert safe_port_range(" 10-20x") == (10, 20)


@pytest.mark.parametrize("argv, message", [
    (["--sagemaker-port=8000"], "The server cannot listen to HTTP requests and SageMaker "
                                "requests at the same address and port 127.0.0.1:8000"),
    (["--sagemaker-port=8001"], "The server cannot listen to GRPC requests and SageMaker "
                                "requests at the same address and port 127.0.0.1:8001"),
    (["--sagemaker-port=8002", "--metrics-address=127.0.0.1"],
     "The server cannot listen to metrics requests and SageMaker requests at the same "
     "address and port 127.0.0.1:8002"),
    (["--openai-port=8080"], "The server cannot listen to SageMaker requests and OpenAI "
                             "requests at the same address and port 127.0.0.1:8080"),
    (["--sagemaker-safe-port-range=9000-9100"],
     "The server cannot listen to HTTP requests at port 8000, allowed port range is "
     "[9000, 9100]"),
    (["--sagemaker-safe-port-range=8000-8001"],
     "The server cannot listen to metrics requests at port 8002, allowed port range is "
     "[8000, 8001]"),
])
def test_port_clashes_refuse_with_the_executables_texts(argv, message):
    with pytest.raises(ValueError) as e:
        check_ports(parse("--allow-sagemaker", *argv))
    assert str(e.value) == message


@pytest.mark.parametrize("argv", [
    ["--sagemaker-port=8000", "--allow-http=false"],  # nothing else on the port
    ["--sagemaker-port=8001", "--grpc-address=0.0.0.0"],  # another address (as a string)
    ["--sagemaker-port=0", "--http-port=0", "--grpc-port=0", "--metrics-port=0"],
    ["--sagemaker-safe-port-range=8000-8002"],
    ["--sagemaker-safe-port-range=1-2", "--allow-http=false", "--allow-grpc=false",
     "--allow-metrics=false"],
])
def test_no_clash(argv):
    check_ports(parse("--allow-sagemaker", *argv))


def test_without_sagemaker_the_ports_are_not_checked():
    check_ports(parse("--sagemaker-port=8000", "--sagemaker-safe-port-range=1-2"))
