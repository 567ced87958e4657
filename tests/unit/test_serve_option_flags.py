"""The executable's flags for the core's settings, as serve reads them
(_cli.option_flags): their formats and texts are the 2.51 executable's; the
GPU and Vertex AI flags are refused with the reason (SageMaker's are served:
unit/test_sagemaker_pieces.py); and the
executable command's setup (_cli.executable) adds a backend folder only where
none is given."""

from __future__ import annotations

import pytest

import tritonserver
from tritonserver._cli import option_flags
from tritonserver._cli.executable import ExecutableSetup
from tritonserver._cli.serve_flags import build_parser, server_options
from tritonserver._control.banner import mode_row
from tritonserver._options import RateLimiterResource


def parse(*argv):
    return build_parser().parse_args(["--model-repository=/r", *argv])


def options(*argv):
    return server_options(parse(*argv))


def test_core_setting_flags_to_options():
    o = options("--cache-config=local,size=1048576", "--cache-config", "redis,host=h=1",
                "--cache-directory=/caches", "--rate-limit=EXECUTION_COUNT",
                "--rate-limit-resource=R1:10:0", "--rate-limit-resource", "R2:4",
                "--host-policy=cpu,cpu-cores=0-1", "--host-policy=cpu,numa-node=0",
                "--host-policy=gpu_0,numa-node=1", "--metrics-config=summary_latencies=true",
                "--metrics-config", "summary_quantiles=0.5:0.05",
                "--repoagent-directory=/agents", "--buffer-manager-thread-count=3")
    assert o.cache_config == {"local": {"size": "1048576"}, "redis": {"host": "h=1"}}
    assert o.cache_directory == "/caches"
    assert o.rate_limiter_mode == tritonserver.RateLimitMode.EXEC_COUNT
    assert o.rate_limiter_resources == [RateLimiterResource("R1", 10, 0),
                                        RateLimiterResource("R2", 4, -1)]
    assert o.host_policies == {"cpu": {"cpu-cores": "0-1", "numa-node": "0"},
                               "gpu_0": {"numa-node": "1"}}
    assert o.metrics_configuration == {"": {"summary_latencies": "true",
                                            "summary_quantiles": "0.5:0.05"}}
    assert o.repo_agent_directory == "/agents" and o.buffer_manager_thread_count == 3
    o._validate()


def test_core_setting_defaults_are_the_executables():
    o = options()
    assert o.cache_config == {} and o.cache_directory is None
    assert o.rate_limiter_mode == tritonserver.RateLimitMode.OFF
    assert o.rate_limiter_resources == [] and o.host_policies == {}
    assert o.metrics_configuration == {} and o.buffer_manager_thread_count == 0
    assert o.repo_agent_directory == "/opt/tritonserver/repoagents"
    assert parse().grpc_infer_allocation_pool_size == 8


def test_response_cache_byte_size_is_the_local_cache_with_the_executables_warning():
    args = parse("--response-cache-byte-size=4096")
    assert server_options(args).cache_config == {"local": {"size": "4096"}}
    (warning,) = option_flags.warnings(args)
    assert warning.startswith("Warning: '--response-cache-byte-size' has been deprecated!")
    assert "'--cache-config=local,size=4096'" in warning
    assert option_flags.warnings(parse()) == []


@pytest.mark.parametrize("argv,message", [
    (["--response-cache-byte-size=1", "--cache-config=local,size=1"],
     "Incompatible flags --response-cache-byte-size and --cache-config both provided"),
    (["--cache-config=size=1"], "No cache specified. --cache-config option format is"),
    (["--cache-config=,size=1"], "No cache specified"),
    (["--cache-config=local,size"], "--cache-config option format is '<cache name>,"),
    (["--cache-config=local,size="], "--cache-config option format is"),
    (["--rate-limit=sometimes"], "invalid argument for --rate-limit"),
    (["--rate-limit-resource=R1"], "--rate-limit-resource option format is "
                                   "'<resource_name>:<count>:<device>' or"),
    (["--rate-limit-resource=R1:1:0:0"], "--rate-limit-resource option format"),
    (["--rate-limit-resource=R1:x"], "the count and the device are integers"),
    (["--host-policy=cpu"], "--host-policy option format is '<policy name>,<setting>=<value>'"),
    (["--host-policy=,numa-node=0"], "--host-policy option format"),
    (["--host-policy=cpu,numa-node="], "--host-policy option format"),
    (["--metrics-config=summary_latencies"], "--metrics-config option format is "
                                             "<setting>=<value>. Got summary_latencies"),
    (["--metrics-config=group,a=b"], "--metrics-config option format"),
    (["--metrics-config==true"], "--metrics-config option format"),
])
def test_bad_core_settings_get_the_executables_texts(argv, message):
    with pytest.raises(ValueError) as e:
        options(*argv)
    assert message in str(e.value)


@pytest.mark.parametrize("flag", sorted(option_flags.REFUSED))
def test_gpu_and_vertex_flags_are_refused_with_the_reason(flag, capsys):
    with pytest.raises(SystemExit) as e:
        parse(f"{flag}=1")
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: not supported: {option_flags.REFUSED[flag]}" in err
    assert "unrecognized" not in err


def test_refusal_reasons_say_why():
    assert "GPU" in option_flags.REFUSED["--cuda-memory-pool-byte-size"]
    assert not any("sagemaker" in flag for flag in option_flags.REFUSED)
    assert "Vertex AI" in option_flags.REFUSED["--vertex-ai-default-model"]
    assert "--model-config-name" not in option_flags.REFUSED


@pytest.mark.parametrize("argv", [["--allow-sagemaker=false"], ["--allow-vertex-ai", "0"],
                                  ["--enable-peer-access=off"]])
def test_asking_for_no_sagemaker_vertex_or_peer_access_is_accepted(argv):
    assert isinstance(options(*argv), tritonserver.Options)


def test_banner_row_names_the_chosen_mode_and_keeps_the_width():
    table = (b"| model_control_mode               | MODE_EXPLICIT                  |\n"
             b"| strict_model_config              | 0                              |\n")
    out = mode_row(table, "NONE")
    assert out.splitlines()[0] == (b"| model_control_mode               | MODE_NONE"
                                   b"                      |")
    assert out.splitlines()[1] == table.splitlines()[1]
    assert len(out) == len(table)
    assert mode_row(b"no table here\n", "NONE") == b"no table here\n"


class _Core:
    executable = "/core/bin/tritonserver"
    libs_dir = "/core/libs"


def _setup() -> ExecutableSetup:
    setup = ExecutableSetup.__new__(ExecutableSetup)
    setup.core, setup.backend_dir = _Core(), "/run/backends"
    setup.stub = type("Stub", (), {"usable": False})()
    return setup


def test_executable_command_adds_the_backend_folder_unless_given():
    setup = _setup()
    assert setup.command(["--model-repository=/r"]) == [
        "/core/bin/tritonserver", "--backend-directory=/run/backends", "--model-repository=/r"]
    for given in (["--backend-directory=/mine"], ["--backend-directory", "/mine"]):
        assert setup.command(given) == ["/core/bin/tritonserver", *given]


def test_executable_environment_puts_the_cores_libraries_first():
    env = _setup().environment({"LD_LIBRARY_PATH": "/x", "PATH": "/bin"})
    assert env == {"LD_LIBRARY_PATH": "/core/libs:/x", "PATH": "/bin"}
    assert _setup().environment({})["LD_LIBRARY_PATH"] == "/core/libs"


def test_histogram_latencies_flag_turns_the_first_response_histogram_on():
    from tritonserver._control import latency_histograms

    assert latency_histograms.enabled(options("--metrics-config=histogram_latencies=true"))
    assert not latency_histograms.enabled(options())
    assert not latency_histograms.enabled(options("--metrics-config=histogram_latencies=false"))
    # No metrics, no histogram (Triton's --allow-metrics=false).
    assert not latency_histograms.enabled(
        options("--metrics-config=histogram_latencies=true", "--allow-metrics=false"))


def test_model_metrics_buckets_the_last_control_of_the_family_wins():
    from tritonserver._control import latency_histograms

    family = {"family": latency_histograms.FAMILY}
    config = {"model_metrics": {"metric_control": [
        {"metric_identifier": family, "histogram_options": {"buckets": [1, 2]}},
        {"metric_identifier": {"family": "other"}, "histogram_options": {"buckets": [9]}},
        {"metric_identifier": family, "histogram_options": {"buckets": [-1, 0.5]}}]}}
    latency_histograms.check(config)
    assert latency_histograms.buckets(config) == [-1.0, 0.5]
    assert latency_histograms.buckets({}) == []


def test_a_signal_during_a_write_to_standard_error_stops_cleanly(monkeypatch, capfd):
    """Python runs a signal handler inside a buffered write that the signal
    interrupted (EINTR): the handler's own line then re-entered the same
    stream ("reentrant call", RuntimeError), which escaped into serve's
    main thread and ended a clean stop with status 1 (seen in a CI run).
    Here the handler runs in the middle of a write to standard error."""
    import io
    import signal
    import sys

    from tritonserver._cli.serve_flags import Signals, say

    signals = Signals()

    class Interrupted(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, data) -> int:
            if not signals.stop.is_set():
                signals._handle(signal.SIGTERM, None)  # the signal, mid-write
            return len(data)

    stream = io.TextIOWrapper(io.BufferedWriter(Interrupted()), line_buffering=True)
    monkeypatch.setattr(sys, "stderr", stream)
    say("tritonserver serve: ready")
    assert signals.stop.is_set()
    assert "signal 15: stopping" in capfd.readouterr().err


SIGNAL_TO_ANOTHER_THREAD = """
import signal, sys, threading, time
from tritonserver._cli.serve_flags import Signals

signals = Signals()
signals.install()
asleep = threading.Event()

def other():  # a thread of the core's, gRPC's or an event loop's
    asleep.set()
    time.sleep(600)

thread = threading.Thread(target=other, daemon=True)
thread.start()
asleep.wait()
threading.Timer(0.2, signal.pthread_kill, (thread.ident, signal.SIGTERM)).start()
print("stopped" if signals.wait(timeout=None if sys.argv[1] == "forever" else 300) else "timed out",
      flush=True)
"""


@pytest.mark.parametrize("timeout", ["forever", "300"])
def test_a_sigterm_that_reaches_another_thread_still_stops_serve(timeout):
    """The kernel may give a process's SIGTERM to any thread; Python runs the
    handler in the main thread when it next runs Python code. serve's main
    thread slept in one long wait, so such a SIGTERM went unhandled until
    the wait ended (the soak saw a serve still serving 30 s after SIGTERM).
    Signals.wait sleeps in short steps: the stop comes within a step."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", SIGNAL_TO_ANOTHER_THREAD, timeout],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "stopped"
    assert "signal 15: stopping" in out.stderr


def test_the_python_backend_follows_the_environment_unless_a_flag_says(monkeypatch):
    monkeypatch.delenv("TRITONSERVER_PYTHON_BACKEND", raising=False)
    assert options().python_backend == "stub"
    assert tritonserver.Options().python_backend == "stub"
    monkeypatch.setenv("TRITONSERVER_PYTHON_BACKEND", "inprocess")
    assert options().python_backend == "inprocess"
    assert tritonserver.Options().python_backend == "inprocess"
    assert options("--python-backend=stub").python_backend == "stub"
    assert tritonserver.Options(python_backend="stub").python_backend == "stub"
