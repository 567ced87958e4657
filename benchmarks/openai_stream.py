#!/usr/bin/env python3
"""Streaming text: time to first token and tokens per second through the
OpenAI frontend, against the same model through the generate extension's
generate_stream (KServeHttp) and through Model.async_infer in process.

    python benchmarks/openai_stream.py                  # 256 tokens, 30 requests each
    python benchmarks/openai_stream.py --quick          # a smoke run
    python benchmarks/openai_stream.py --tokens 1024 --requests 50 --json out.json
    python benchmarks/openai_stream.py --nvidia-openai DIR --nvidia-python PYTHON

One server holds a decoupled model, a pb_utils ``model.py`` on the
package's inprocess backend (Python in the server's process, as a
PythonModel), that sends one-word responses as fast as it can: as many as
its ``max_tokens`` input says, else its ``count`` parameter. The HTTP paths
are read by the same client, in a process of its own (http.client,
server-sent events parsed line by line), so the difference between them is
what the OpenAI layer adds over the HTTP frontend. Requests run one after
another, each system in turn, round by round. Figures: the median (min-max)
over the requests of the time to the first token and of tokens per second
(tokens / time from sending to the last token).

``--nvidia-openai`` adds NVIDIA's OpenAI frontend (the server repository's
python/openai, e.g. as tests/openai_check fetched it) on this package: its
main.py run by ``--nvidia-python`` (a Python that has its requirements, such
as the check's virtual environment) on the same repository in a process of
its own, with ``--backend tensorrtllm`` (the model declares the inputs
NVIDIA's engine sends a TensorRT-LLM model; ``max_tokens`` sets the count).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Optional

SYSTEMS = ("async_infer", "generate_stream", "openai")
NVIDIA = "nvidia_openai"


# ---- The client (its own process) -------------------------------------------------------


def client_main(port: int, path: str, body: str, requests: int) -> None:
    """Sends ``requests`` streaming requests one after another; prints one JSON
    line per request: [seconds to the first token, seconds to the last, tokens]."""
    conn = http.client.HTTPConnection("127.0.0.1", port)
    for _ in range(requests):
        start = time.perf_counter()
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        first = last = 0.0
        tokens = 0
        while True:
            line = response.readline()
            if not line:
                break
            if not line.startswith(b"data: ") or line.startswith(b"data: [DONE]"):
                continue
            event = json.loads(line[6:])
            text = event["choices"][0]["text"] if "choices" in event else event.get("text_output")
            if text:
                last = time.perf_counter() - start
                if not tokens:
                    first = last
                tokens += 1
        print(json.dumps([first, last, tokens]), flush=True)
    conn.close()


# ---- The server and the measurements ----------------------------------------------------


MODEL_PY = """import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    \"\"\"Sends one-word responses as fast as it can: max_tokens of them
    when the request has that input, else its count parameter (16).\"\"\"

    def execute(self, requests):
        word = pb_utils.Tensor("text_output", np.array([[b"tok "]], dtype=object))
        for request in requests:
            given = pb_utils.get_input_tensor_by_name(request, "max_tokens")
            if given is not None:
                count = int(given.as_numpy().reshape(-1)[0])
            else:
                import json
                count = int(json.loads(request.parameters()).get("count", 16))
            sender = request.get_response_sender()
            for _ in range(count):
                sender.send(pb_utils.InferenceResponse([word]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

# text_input, then the inputs NVIDIA's engine sends a TensorRT-LLM model
# (optional here: the other systems send text_input alone).
OPTIONAL_INPUTS = (("stream", "TYPE_BOOL"), ("max_tokens", "TYPE_INT32"),
                   ("stop_words", "TYPE_STRING"), ("top_p", "TYPE_FP32"),
                   ("temperature", "TYPE_FP32"), ("frequency_penalty", "TYPE_FP32"),
                   ("presence_penalty", "TYPE_FP32"), ("seed", "TYPE_UINT64"),
                   ("return_num_input_tokens", "TYPE_BOOL"),
                   ("return_num_output_tokens", "TYPE_BOOL"))


def make_repository() -> str:
    root = tempfile.mkdtemp(prefix="openai_stream-")
    os.makedirs(os.path.join(root, "stream", "1"))
    inputs = ['{ name: "text_input" data_type: TYPE_STRING dims: [ -1, -1 ] }'] + [
        f'{{ name: "{name}" data_type: {kind} dims: [ -1, -1 ] optional: true }}'
        for name, kind in OPTIONAL_INPUTS]
    config = ('backend: "inprocess"\nmax_batch_size: 0\n'
              "model_transaction_policy { decoupled: true }\n"
              f"input [ {', '.join(inputs)} ]\n"
              'output [ { name: "text_output" data_type: TYPE_STRING dims: [ -1, -1 ] } ]\n'
              "instance_group [ { kind: KIND_CPU, count: 1 } ]\n")
    with open(os.path.join(root, "stream", "config.pbtxt"), "w") as f:
        f.write(config)
    with open(os.path.join(root, "stream", "1", "model.py"), "w") as f:
        f.write(MODEL_PY)
    return root


def make_server(repository: str) -> Any:
    import tritonserver

    return tritonserver.Server(model_repository=repository).start(wait_until_ready=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_nvidia_frontend(frontend: str, python: str, repository: str,
                          port: int) -> subprocess.Popen:
    """NVIDIA's main.py on this package, ready to serve (or raises)."""
    main_py = os.path.join(frontend, "openai_frontend", "main.py")
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(python), env.get("PATH", "")])
    process = subprocess.Popen(
        [python, main_py, "--model-repository", repository, "--backend", "tensorrtllm",
         "--host", "127.0.0.1", "--openai-port", str(port), "--uvicorn-log-level", "warning"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"NVIDIA's frontend exited: {process.stderr.read()[-2000:]}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health/ready")
            if conn.getresponse().status == 200:
                return process
        except OSError:
            pass
        time.sleep(0.25)
    process.kill()
    raise RuntimeError("NVIDIA's frontend did not become ready within 120 s")


def measure_in_process(server: Any, tokens: int, requests: int) -> list[list[float]]:
    import numpy as np

    model = server.model("stream")
    prompt = np.array([[b"x"]], dtype=object)

    async def run() -> list[list[float]]:
        out = []
        for _ in range(requests):
            start = time.perf_counter()
            first = last = 0.0
            count = 0
            async for response in model.async_infer(inputs={"text_input": prompt},
                                                    parameters={"count": tokens}):
                if response.outputs:
                    last = time.perf_counter() - start
                    if not count:
                        first = last
                    count += 1
            out.append([first, last, count])
        return out

    return asyncio.run(run())


def measure_http(port: int, path: str, body: dict, requests: int) -> list[list[float]]:
    out = subprocess.run([sys.executable, __file__, "--client", str(port), path,
                          json.dumps(body), str(requests)],
                         capture_output=True, text=True, check=True, timeout=600).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def summary(samples: list[list[float]], tokens: int) -> dict[str, Any]:
    complete = [s for s in samples if s[2] == tokens]
    if len(complete) != len(samples):
        raise RuntimeError(f"{len(samples) - len(complete)} requests got fewer than {tokens} "
                           "tokens")
    ttft = [s[0] * 1000 for s in complete]
    rate = [s[2] / s[1] for s in complete]
    return {"ttft_ms": {"median": statistics.median(ttft), "min": min(ttft), "max": max(ttft)},
            "tokens_per_s": {"median": statistics.median(rate), "min": min(rate),
                             "max": max(rate)},
            "requests": len(complete)}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--client"]:
        client_main(int(argv[1]), argv[2], argv[3], int(argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--requests", type=int, default=30, help="per system and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="16 tokens, 3 requests, 1 round")
    parser.add_argument("--json", metavar="PATH", help="write the figures there")
    parser.add_argument("--nvidia-openai", metavar="DIR",
                        help="NVIDIA's python/openai folder: measure its frontend too")
    parser.add_argument("--nvidia-python", metavar="PYTHON", default=sys.executable,
                        help="the Python that runs it (with its requirements)")
    args = parser.parse_args(argv)
    if args.quick:
        args.tokens, args.requests, args.rounds = 16, 3, 1

    from tritonserver.frontends import KServeHttp, OpenAI

    systems = SYSTEMS + ((NVIDIA,) if args.nvidia_openai else ())
    repository = make_repository()
    server = make_server(repository)
    nvidia: Optional[subprocess.Popen] = None
    nvidia_port = free_port()
    samples: dict[str, list[list[float]]] = {s: [] for s in systems}
    try:
        if args.nvidia_openai:
            nvidia = start_nvidia_frontend(args.nvidia_openai, args.nvidia_python, repository,
                                           nvidia_port)
        with KServeHttp(server, KServeHttp.Options(port=0)) as http, \
                OpenAI(server, OpenAI.Options(port=0)) as openai:
            generate = {"text_input": "x", "count": args.tokens}
            completion = {"model": "stream", "prompt": "x", "stream": True,
                          "count": args.tokens}
            # NVIDIA's engine sends max_tokens as the model's input.
            nvidia_completion = {"model": "stream", "prompt": "x", "stream": True,
                                 "max_tokens": args.tokens}
            for _ in range(args.rounds):
                samples["async_infer"] += measure_in_process(server, args.tokens, args.requests)
                samples["generate_stream"] += measure_http(
                    http.port, "/v2/models/stream/generate_stream", generate, args.requests)
                samples["openai"] += measure_http(openai.port, "/v1/completions", completion,
                                                  args.requests)
                if nvidia is not None:
                    samples[NVIDIA] += measure_http(nvidia_port, "/v1/completions",
                                                    nvidia_completion, args.requests)
    finally:
        if nvidia is not None:
            nvidia.terminate()
            try:
                nvidia.wait(30)
            except subprocess.TimeoutExpired:
                nvidia.kill()
        server.stop()
        shutil.rmtree(repository, ignore_errors=True)
    figures = {s: summary(samples[s], args.tokens) for s in systems}
    print(f"{args.tokens} tokens per request, {args.requests} requests x {args.rounds} rounds "
          "per system; median (min-max)")
    print(f"{'system':16s} {'first token, ms':>24s} {'tokens/s':>28s}")
    for s in systems:
        t, r = figures[s]["ttft_ms"], figures[s]["tokens_per_s"]
        print(f"{s:16s} {t['median']:8.2f} ({t['min']:.2f}-{t['max']:.2f})"
              f" {r['median']:12,.0f} ({r['min']:,.0f}-{r['max']:,.0f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"tokens": args.tokens, "requests": args.requests, "rounds": args.rounds,
                       "systems": figures}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
