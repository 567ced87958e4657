"""FIL's own end-to-end QA (fil_backend's qa/L0_e2e/test_model.py) against
``python -m tritonserver serve`` with the FIL plugin (plugins/fil): the QA's
models generated on CPU as qa/generate_example_models.sh generates them,
the QA's client (rapids_triton, from the rapids-triton repository) put on
PYTHONPATH from the fetched source, CPU_ONLY=1. Not part of the pytest
suite (it needs two git mirrors and several minutes): README.md beside it.

    export FIL_BACKEND_GIT=/path/to/fil_backend.git   # git clone --bare
    export RAPIDS_TRITON_GIT=/path/to/rapids-triton.git
    python tests/fil_qa_check/run_fil_qa.py
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from typing import Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples_check"))

from run_examples import die_with_parent, save_log  # noqa: E402

QA = "qa/L0_e2e"
# qa/generate_example_models.sh, model by model: name -> the generator's flags.
# cuml is left out (cuML needs a GPU); lightgbm's --cat_features needs cuDF.
MODELS = {
    "xgboost_json": "--format xgboost_json --depth 7 --trees 500 --features 500 --predict_proba",
    "xgboost_ubj": "--format xgboost_ubj --depth 7 --trees 500 --features 500 --predict_proba",
    "xgboost_shap": "--depth 11 --trees 2000 --classes 3 --features 500 --layout breadth_first "
                    "--max_batch_size 4096",
    "lightgbm": "--format lightgbm --type lightgbm --depth 3 --trees 2000 --predict_proba",
    "lightgbm_rf": "--format lightgbm --type lightgbm_rf --depth 10 --trees 20 --classes 10 "
                   "--predict_proba",
    "regression": "--format lightgbm --type lightgbm --depth 25 --trees 10 --features 400 "
                  "--task regression",
    "sklearn": "--type sklearn --depth 3 --trees 10 --features 500 --predict_proba",
}
NOT_RUN = {
    "cuml": "cuML trains its model on a GPU (and FIL serves cuML pickles only there)",
    "lightgbm --cat_features 3": "the generator makes categorical columns with cuDF (a GPU "
                                 "library): the lightgbm model is trained without them",
    "shared_mem=cuda": "CUDA shared memory (CPU_ONLY=1, as FIL's QA runs on CPU)",
}

# cuML stands in for scikit-learn where the generator only makes data with it.
CUML_SHIM = '''"""What FIL's model generator uses of cuML, on CPU: its datasets (from
scikit-learn, float32 as cuML makes them). Its estimators need a GPU."""
import contextlib

import numpy as np
from sklearn import datasets as _sk


@contextlib.contextmanager
def using_output_type(kind):
    yield


class datasets:
    @staticmethod
    def make_classification(**kwargs):
        x, y = _sk.make_classification(**kwargs)
        return x.astype(np.float32), y

    @staticmethod
    def make_regression(**kwargs):
        x, y = _sk.make_regression(**kwargs)
        return x.astype(np.float32), y.astype(np.float32)
'''
CUML_ENSEMBLE = '''class _OnGpu:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("cuML's forests train on a GPU")


RandomForestClassifier = RandomForestRegressor = _OnGpu
'''


CUDA_STUB = '''"""A stand-in for cuda-python: CUDA shared memory is not used here (CPU_ONLY=1);
its names exist for the annotations that name them."""


def __getattr__(name):
    return type(name, (), {})
'''


def git_show(mirror: str, ref: str, path: str) -> bytes:
    return subprocess.run(["git", "--git-dir", mirror, "show", f"{ref}:{path}"], check=True,
                          capture_output=True).stdout


def extract(mirror: str, ref: str, folder: str, dest: str) -> None:
    names = subprocess.run(["git", "--git-dir", mirror, "ls-tree", "-r", "--name-only", ref,
                            folder + "/"], check=True, capture_output=True, text=True).stdout
    for path in names.split():
        target = os.path.join(dest, os.path.relpath(path, folder))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(git_show(mirror, ref, path))


def prepare(args: argparse.Namespace, work: str) -> tuple[str, str, str]:
    """(the QA folder, the CPU model repository, the client's PYTHONPATH)."""
    qa = os.path.join(work, "L0_e2e")
    extract(args.fil_mirror, args.fil_ref, QA, qa)
    for path in ("scripts/convert_sklearn.py",):
        with open(os.path.join(work, os.path.basename(path)), "wb") as f:
            f.write(git_show(args.fil_mirror, args.fil_ref, path))
    client = os.path.join(work, "client")
    extract(args.rapids_triton_mirror, args.rapids_triton_ref, "python/rapids_triton",
            os.path.join(client, "rapids_triton"))
    shim = os.path.join(work, "cuml_shim", "cuml")
    os.makedirs(shim)
    with open(os.path.join(shim, "__init__.py"), "w") as f:
        f.write(CUML_SHIM)
    with open(os.path.join(shim, "ensemble.py"), "w") as f:
        f.write(CUML_ENSEMBLE)
    # The client imports tritonclient's CUDA shared memory module, which
    # imports cuda-python; with CPU_ONLY=1 nothing of it is called.
    stub = os.path.join(client, "cuda", "bindings")
    os.makedirs(stub)
    for name in ("../__init__.py", "__init__.py", "runtime.py", "driver.py"):
        with open(os.path.join(stub, name), "w") as f:
            f.write(CUDA_STUB)
    generator = os.path.join(qa, "generate_example_model.py")
    with open(generator) as f:
        text = f.read()
    # XGBoost trains where the QA's container has a GPU: on CPU here.
    with open(generator, "w") as f:
        f.write(text.replace('"device": "cuda"', '"device": "cpu"'))
    return qa, os.path.join(qa, "cpu_model_repository"), client


def generate(qa: str, work: str, logs: str, only: Sequence[str]) -> None:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(work, "cuml_shim")] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    repo = os.path.join(qa, "model_repository")
    for name, flags in MODELS.items():
        if only and name not in only:
            continue
        if os.path.isdir(os.path.join(repo, name)):
            continue
        cmd = [sys.executable, os.path.join(qa, "generate_example_model.py"), "--name", name,
               *flags.split()]
        started = time.monotonic()
        run = subprocess.run(cmd, cwd=qa, env=env, capture_output=True, text=True)
        save_log(os.path.join(logs, f"generate_{name}.log"), cmd, run.returncode,
                 run.stdout + run.stderr)
        if run.returncode != 0:
            raise SystemExit(f"generating {name} failed:\n{run.stdout}{run.stderr}")
        print(f"generated {name} in {time.monotonic() - started:.0f} s", flush=True)
        if name == "sklearn":
            subprocess.run([sys.executable, os.path.join(work, "convert_sklearn.py"),
                            os.path.join(repo, name, "1", "model.pkl")], check=True)
    cpu = os.path.join(qa, "cpu_model_repository")
    shutil.rmtree(cpu, ignore_errors=True)
    shutil.copytree(repo, cpu)
    for root, _, files in os.walk(cpu):
        for file in files:
            if file == "config.pbtxt":
                path = os.path.join(root, file)
                with open(path) as f:
                    text = f.read()
                with open(path, "w") as f:
                    f.write(text.replace("KIND_GPU", "KIND_CPU"))


def ports_free(ports: Sequence[int]) -> bool:
    for port in ports:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return False
    return True


def serve(repo: str, log_path: str) -> subprocess.Popen:
    if not ports_free((8000, 8001, 8002)):
        raise SystemExit("ports 8000-8002 (the QA client's) are in use: stop what holds them")
    log = open(log_path, "w")
    return subprocess.Popen([sys.executable, "-m", "tritonserver", "serve", "--model-repository",
                             repo], stdout=log, stderr=subprocess.STDOUT,
                            preexec_fn=die_with_parent)


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--fil-mirror", default=os.environ.get("FIL_BACKEND_GIT", ""),
                   help="git clone (bare) of triton-inference-server/fil_backend "
                        "(default: $FIL_BACKEND_GIT)")
    p.add_argument("--fil-ref", default="HEAD")
    p.add_argument("--rapids-triton-mirror", default=os.environ.get("RAPIDS_TRITON_GIT", ""),
                   help="git clone (bare) of rapidsai/rapids-triton (default: $RAPIDS_TRITON_GIT)")
    p.add_argument("--rapids-triton-ref", default="HEAD")
    p.add_argument("--workdir", default=None, help="reuse this folder (its generated models too)")
    p.add_argument("--models", default="", help="comma-separated: only these models")
    p.add_argument("--profile", choices=("dev", "ci"), default="ci",
                   help="the QA's hypothesis profile: ci (100 examples per test, run_tests.sh's "
                        "default) or dev (10)")
    p.add_argument("--timeout", type=float, default=3600, help="seconds for the QA run")
    p.add_argument("--runxfail", action="store_true",
                   help="run the tests the QA marks xfail (xgboost_shap) as ordinary ones")
    args = p.parse_args(argv)
    if not args.fil_mirror or not args.rapids_triton_mirror:
        p.error("name the two git clones: --fil-mirror and --rapids-triton-mirror (or "
                "FIL_BACKEND_GIT and RAPIDS_TRITON_GIT)")
    work = args.workdir or tempfile.mkdtemp(prefix="fil_qa_check-")
    os.makedirs(work, exist_ok=True)
    logs = os.path.join(work, "logs")
    os.makedirs(logs, exist_ok=True)
    print(f"work folder: {work}", flush=True)
    only = [m for m in args.models.split(",") if m]
    if os.path.isdir(os.path.join(work, "L0_e2e")):
        qa, client = os.path.join(work, "L0_e2e"), os.path.join(work, "client")
    else:
        qa, _, client = prepare(args, work)
    generate(qa, work, logs, only)
    repo = os.path.join(qa, "cpu_model_repository")
    if only:
        for name in os.listdir(repo):
            if name not in only:
                shutil.rmtree(os.path.join(repo, name))
    server = serve(repo, os.path.join(logs, "serve.log"))
    try:
        env = dict(os.environ, CPU_ONLY="1", PYTHONPATH=os.pathsep.join(
            [client] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
        junit = os.path.join(work, "results.xml")
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--repo", repo,
               "--junitxml", junit, "-k", " or ".join(only) if only else "not cuml",
               "test_model.py"]
        if args.runxfail:
            cmd[3:3] = ["--runxfail"]
        cmd[3:3] = ["--hypothesis-profile", args.profile]
        started = time.monotonic()
        run = subprocess.run(cmd, cwd=qa, env=env, capture_output=True, text=True,
                             timeout=args.timeout)
        save_log(os.path.join(logs, "qa.log"), cmd, run.returncode, run.stdout + run.stderr)
        print(run.stdout[-4000:])
        print(f"QA ran {time.monotonic() - started:.0f} s, exit status {run.returncode}")
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
    return report(junit)


def report(junit: str) -> int:
    if not os.path.isfile(junit):
        print("no results (see logs/qa.log)")
        return 1
    counts = {"passed": 0, "failed": 0, "skipped": 0, "xfailed": 0, "error": 0}
    rows = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        verdict = "passed"
        for kind in ("failure", "error", "skipped"):
            element = case.find(kind)
            if element is not None:
                verdict = {"failure": "failed"}.get(kind, kind)
                if element.get("type") == "pytest.xfail":
                    verdict = "xfailed"  # the QA marks it so itself
                rows.append((case.get("name"), verdict,
                             re.sub(r"\s+", " ", element.get("message") or "")[:200]))
        counts[verdict] += 1
    print("\nFIL QA (qa/L0_e2e/test_model.py) on serve:",
          ", ".join(f"{v} {k}" for k, v in counts.items()))
    for name, verdict, message in rows:
        print(f"  {verdict}: {name}: {message}")
    print("not run here:")
    for what, why in NOT_RUN.items():
        print(f"  {what}: {why}")
    return 0 if counts["failed"] == counts["error"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
