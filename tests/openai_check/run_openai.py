"""Run NVIDIA's OpenAI-compatible frontend for Triton, unchanged, on this
package, with its own tests.

NVIDIA's frontend (github.com/triton-inference-server/server, python/openai)
is a FastAPI program on NVIDIA's in-process `tritonserver` package: it
starts a `tritonserver.Server`, answers OpenAI's API with
`Model.async_infer`, and can start `tritonfrontend`'s KServe frontends on
the same server. This check fetches it from a local mirror of the server
repository at a pinned commit, makes a virtual environment that sees this
package (`--system-site-packages`) with the frontend's own requirement files
installed, and runs its tests that need no GPU and no Hugging Face model, on
its python-backend test models, as NVIDIA's CI runs them (pytest in
python/openai, TEST_* variables naming the backend, model and repository).

Standalone (not a pytest module, not run in CI): the program is not in this
repository and the run installs its requirements from the package index.
See README.md beside this file.

    python tests/openai_check/run_openai.py [--server-mirror DIR] [--ref REF]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from typing import Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples_check"))
import make_repo  # noqa: E402
import run_examples as ex  # noqa: E402  (puts benchmarks/ on sys.path)
from tsbench.procs import loopback_only  # noqa: E402

# main of the server repository when the frontend was last checked.
REF = "e1db8a603"
FRONTEND = "python/openai"
# The tests that need neither a GPU nor a tokenizer download (the others
# need vLLM or TensorRT-LLM models, or a Hugging Face tokenizer).
TESTS = ("tests/test_observability.py", "tests/test_request_size.py",
         "tests/test_model_management.py")
# As NVIDIA's CI names them; TEST_TOKENIZER empty: no tokenizer.
TEST_ENV = {"TEST_BACKEND": "tensorrtllm", "TEST_MODEL": "mock_llm",
            "TEST_MODEL_REPOSITORY": "tests/test_models", "TEST_TOKENIZER": ""}
# Its engine imports transformers, which its requirement files leave to the
# container.
EXTRA = ("transformers",)


def make_venv(venv: str, frontend: str) -> str:
    """A virtual environment that sees this package (and its core) and has
    the frontend's requirements; returns its python."""
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
    requirements = [os.path.join(frontend, name)
                    for name in ("requirements.txt", "requirements-test.txt")]
    command = [python, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    for path in requirements:
        command += ["-r", path]
    subprocess.run(command + list(EXTRA), check=True)
    return python


# Tests that send mock_llm the inputs of a TensorRT-LLM model: mock_llm's
# config declares three (text_input, stream, return_logprobs), the engine
# sends nine, and every Triton core refuses such a request before the model
# sees it. They need a real TensorRT-LLM or vLLM repository (NVIDIA's CI runs
# them on one); here they fail on NVIDIA's own code and models, and the check
# shows it by sending the same request to Triton's executable.
NEEDS_AN_LLM = {"tests.test_model_management.TestModelManagementInference::" + name
                for name in ("test_load_completions", "test_unload_rejects_inference",
                             "test_reload_inference")}
CORE_REFUSAL = "expected number of inputs between 2 and 3 but got 9 inputs for model 'mock_llm'"


def engine_request_to(url: str) -> str:
    """Send mock_llm what the frontend's engine sends for a completion with
    --backend tensorrtllm (its _create_trtllm_generate_request: these
    inputs, [1, 1] each) on a KServe gRPC stream (mock_llm is decoupled);
    the server's answer."""
    import queue

    import numpy as np
    import tritonclient.grpc as grpcclient

    tensors = {"text_input": np.array([[b"What is machine learning?"]], dtype=object),
               "stream": np.array([[False]]), "max_tokens": np.array([[10]], np.int32),
               "temperature": np.array([[1.0]], np.float32),
               "top_p": np.array([[1.0]], np.float32),
               "frequency_penalty": np.array([[0.0]], np.float32),
               "presence_penalty": np.array([[0.0]], np.float32),
               "return_num_input_tokens": np.array([[True]]),
               "return_num_output_tokens": np.array([[True]])}
    inputs = []
    for name, value in tensors.items():
        datatype = {"object": "BYTES", "bool": "BOOL", "int32": "INT32",
                    "float32": "FP32"}[value.dtype.name]
        tensor = grpcclient.InferInput(name, list(value.shape), datatype)
        tensor.set_data_from_numpy(value)
        inputs.append(tensor)
    answers: "queue.Queue[str]" = queue.Queue()
    client = grpcclient.InferenceServerClient(url)
    try:
        client.start_stream(callback=lambda result, error: answers.put(
            "answered" if error is None else str(error)))
        client.async_stream_infer("mock_llm", inputs)
        try:
            return answers.get(timeout=60)
        except queue.Empty:
            return "no answer within 60 s"
    finally:
        client.stop_stream()
        client.close()


def prove_needs_an_llm(frontend: str, work: str) -> Dict[str, str]:
    """What Triton's executable and serve answer to the request those tests
    send, on the frontend's own test repository."""
    repository = os.path.join(frontend, "tests", "test_models")
    answers: Dict[str, str] = {}
    for kind in ("exe", "serve"):
        install = ex.Installation() if kind == "exe" else None
        server = ex.Server(kind, "openai", repository, [], install, work, work)
        server.start()
        try:
            if not server.wait_ready(time.monotonic() + ex.READY_TIMEOUT_S):
                answers[kind] = f"server did not start: {server.error}"
                continue
            answers[kind] = engine_request_to(server.url("grpc"))
        finally:
            server.stop()
    return answers


def results(junit: str) -> Dict[str, str]:
    """test id -> passed / failed / error / skipped, from pytest's junit XML."""
    outcome: Dict[str, str] = {}
    for case in ElementTree.parse(junit).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = [child.tag for child in case]
        outcome[name] = next((k for k in ("error", "failure", "skipped") if k in kinds),
                             "passed").replace("failure", "failed")
    return outcome


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server-mirror", default=make_repo.SERVER_MIRROR,
                   help="bare git mirror of triton-inference-server/server "
                        "(default: $TRITON_SERVER_GIT)")
    p.add_argument("--ref", default=REF, help=f"commit of the frontend (default {REF})")
    p.add_argument("--work", default=None, help="work folder (default: a new temporary one)")
    p.add_argument("--venv", default=None,
                   help="virtual environment to make or reuse (default: in the work folder)")
    p.add_argument("-k", dest="keyword", default=None, help="pytest -k expression")
    args = p.parse_args(argv)
    if not args.server_mirror:
        p.error("name the server repository's mirror: --server-mirror or TRITON_SERVER_GIT")

    work = args.work or tempfile.mkdtemp(prefix="openai_check-")
    os.makedirs(work, exist_ok=True)
    commit = make_repo.git_extract(args.server_mirror, args.ref, [FRONTEND], work)
    frontend = os.path.join(work, FRONTEND)
    print(f"NVIDIA's OpenAI frontend from {args.server_mirror} @ {commit[:12]}, in {frontend}",
          flush=True)

    python = make_venv(args.venv or os.path.join(work, "venv"), frontend)
    env = loopback_only(dict(os.environ))
    env.update(TEST_ENV)
    # Its test servers run `python3 openai_frontend/main.py`: the venv's.
    env["PATH"] = os.pathsep.join([os.path.dirname(python), env.get("PATH", "")])
    env.pop("PYTHONPATH", None)
    junit = os.path.join(work, "results.xml")
    command = [python, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={junit}",
               *TESTS]
    if args.keyword:
        command += ["-k", args.keyword]
    print("$", " ".join(command), flush=True)
    log = os.path.join(work, "pytest.log")
    with open(log, "w", encoding="utf-8") as out:
        run = subprocess.run(command, cwd=frontend, env=env, stdout=out,
                             stderr=subprocess.STDOUT)
    outcome = results(junit) if os.path.exists(junit) else {}
    proof: Dict[str, str] = {}
    if any(outcome.get(name) in ("failed", "error") for name in NEEDS_AN_LLM):
        proof = prove_needs_an_llm(frontend, work)
    return report(outcome, run.returncode, log, proof)


def report(outcome: Dict[str, str], returncode: int, log: str, proof: Dict[str, str]) -> int:
    counts: Dict[str, int] = {}
    for kind in outcome.values():
        counts[kind] = counts.get(kind, 0) + 1
    print(f"\n{len(outcome)} tests: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    bad: List[str] = [name for name, kind in sorted(outcome.items())
                      if kind in ("failed", "error")]
    for name in bad:
        print(f"  {outcome[name]}: {name}")
    theirs = [name for name in bad if name in NEEDS_AN_LLM]
    if theirs:
        proven = all(CORE_REFUSAL in answer for answer in proof.values()) and len(proof) == 2
        print(f"\n{len(theirs)} of these send mock_llm a TensorRT-LLM model's nine inputs; "
              "the same request, sent on a KServe gRPC stream to the frontend's test repository:")
        for kind, answer in proof.items():
            print(f"  {ex.TITLES[kind]}: {answer}")
        print("  -> the core refuses it on both: NVIDIA's test model, not this package"
              if proven else "  -> not proven: the servers do not both refuse it as the core does")
        if proven:
            bad = [name for name in bad if name not in NEEDS_AN_LLM]
    print(f"pytest output: {log}")
    if not outcome:
        print(f"pytest ended with status {returncode} and no results")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    ex.die_with_parent()
    sys.exit(main())
