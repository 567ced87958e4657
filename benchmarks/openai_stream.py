#!/usr/bin/env python3
"""Streaming text: time to first token and tokens per second through the
OpenAI frontend, against the same model through the generate extension's
generate_stream (KServeHttp) and through Model.async_infer in process.

    python benchmarks/openai_stream.py                  # 256 tokens, 30 requests each
    python benchmarks/openai_stream.py --quick          # a smoke run
    python benchmarks/openai_stream.py --tokens 1024 --requests 50 --json out.json

One server holds a decoupled PythonModel that sends ``count`` one-word
responses as fast as it can. Both HTTP paths are read by the same client,
in a process of its own (http.client, server-sent events parsed line by
line), so the difference between them is what the OpenAI layer adds over
the HTTP frontend. Requests run one after another, each system in turn,
round by round. Figures: the median (min-max) over the requests of the
time to the first token and of tokens per second (tokens / time from
sending to the last token).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import statistics
import subprocess
import sys
import time
from typing import Any

SYSTEMS = ("async_infer", "generate_stream", "openai")


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


def make_server() -> Any:
    import numpy as np

    import tritonserver

    class Stream(tritonserver.PythonModel):
        """Sends ``count`` one-word responses as fast as it can."""

        def execute(self, requests: list) -> None:
            word = {"text_output": np.array([b"tok "], dtype=object)}
            for request in requests:
                for _ in range(int(request.parameters.get("count", 16))):
                    request.sender.send(word)
                request.sender.finish()

    server = tritonserver.Server()
    server.register_model("stream", Stream, inputs={"text_input": (bytes, [1])},
                          outputs={"text_output": (bytes, [1])}, decoupled=True)
    return server.start(wait_until_ready=True)


def measure_in_process(server: Any, tokens: int, requests: int) -> list[list[float]]:
    import numpy as np

    model = server.model("stream")
    prompt = np.array([b"x"], dtype=object)

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
    args = parser.parse_args(argv)
    if args.quick:
        args.tokens, args.requests, args.rounds = 16, 3, 1

    from tritonserver.frontends import KServeHttp, OpenAI

    server = make_server()
    samples: dict[str, list[list[float]]] = {s: [] for s in SYSTEMS}
    try:
        with KServeHttp(server, KServeHttp.Options(port=0)) as http, \
                OpenAI(server, OpenAI.Options(port=0)) as openai:
            generate = {"text_input": "x", "count": args.tokens}
            completion = {"model": "stream", "prompt": "x", "stream": True,
                          "count": args.tokens}
            for _ in range(args.rounds):
                samples["async_infer"] += measure_in_process(server, args.tokens, args.requests)
                samples["generate_stream"] += measure_http(
                    http.port, "/v2/models/stream/generate_stream", generate, args.requests)
                samples["openai"] += measure_http(openai.port, "/v1/completions", completion,
                                                  args.requests)
    finally:
        server.stop()
    figures = {s: summary(samples[s], args.tokens) for s in SYSTEMS}
    print(f"{args.tokens} tokens per request, {args.requests} requests x {args.rounds} rounds "
          "per system; median (min-max)")
    print(f"{'system':16s} {'first token, ms':>24s} {'tokens/s':>28s}")
    for s in SYSTEMS:
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
