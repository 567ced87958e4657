"""Models that the tests register in each replica (through ``setup``); Ray's
workers import this module (conftest puts the tests folder on their path)."""

from __future__ import annotations

import threading

import numpy as np

import tritonserver
import tritonserver.ray


class StopServer(tritonserver.PythonModel):
    """Answers, then stops the replica's Server from another thread: the
    replica stays up but its server is no longer live (what a crashed core
    looks like to the health check)."""

    def execute(self, requests):  # type: ignore[no-untyped-def]
        server = tritonserver.ray.current_server()
        threading.Thread(target=server.stop, daemon=True).start()
        return [{"OUT": np.array([1], dtype=np.int32)} for _ in requests]


def register_stopper(server: tritonserver.Server) -> None:
    server.register_model("stop_server", StopServer, inputs={"IN": (np.int32, [1])},
                          outputs={"OUT": (np.int32, [1])}, max_batch_size=0,
                          instance_count=1)


class UpperWords(tritonserver.PythonModel):
    """Decoupled text generation as OpenAI's API serves it: the prompt's
    words, upper-cased, one response each."""

    def execute(self, requests):  # type: ignore[no-untyped-def]
        for request in requests:
            prompt = request.inputs["text_input"].reshape(-1)[0].decode()
            for word in prompt.split():
                request.sender.send(
                    {"text_output": np.array([word.upper().encode() + b" "], dtype=object)})
            request.sender.finish()


def register_upper_words(server: tritonserver.Server) -> None:
    server.register_model("upper_words", UpperWords, inputs={"text_input": (bytes, [1])},
                          outputs={"text_output": (bytes, [1])}, decoupled=True)
