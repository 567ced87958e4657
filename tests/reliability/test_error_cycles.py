"""A model's error response, raised by a reader of responses, leaves no
reference cycle behind: the request's iterator, with its request and its
responses, dies by reference counting alone, not at the cyclic collector's
next run (which, for an iterator old enough to sit in the oldest
generation, can be long after)."""

from __future__ import annotations

import asyncio
import weakref

import numpy as np
import pytest

import tritonserver
from reliability.support import collector_off, released
from tritonserver.frontends.dataplane import generate
from tritonserver.frontends.dataplane import text_generation as tg


def cancelled(model: tritonserver.Model) -> tritonserver.AsyncResponseIterator:
    """An iterator whose request is cancelled as soon as it is sent: the
    repeat backend answers with an error response (CANCELLED)."""
    iterator = model.async_infer(inputs={"IN": np.arange(100_000, dtype=np.int32)},
                                 raise_on_error=False)
    iterator.cancel()
    return iterator


async def generate_document(iterator) -> None:
    await generate.only_document(iterator, None, None)


async def text_stream(iterator) -> None:
    model = tg.TextModel("repeat_int32", True, {}, set(), 0)
    stream = tg.TextStream(iterator, model, tg.Generation("prompt", stream=True))
    while await stream.next() is not None:
        pass


@pytest.mark.parametrize("reader", [generate_document, text_stream],
                         ids=["generate", "text-generation"])
def test_raised_error_response_frees_the_iterator(server, reader):
    model = server.model("repeat_int32")

    async def once() -> tuple[str, bool]:
        iterator = cancelled(model)
        ref = weakref.ref(iterator)
        with collector_off():
            try:
                await reader(iterator)
            except tritonserver.TritonError as e:
                raised = type(e).__name__
            else:
                raised = ""
            del iterator
            freed = await asyncio.to_thread(released, ref)  # the loop runs meanwhile
        return raised, freed

    for raised, freed in [asyncio.run(once()) for _ in range(5)]:
        assert raised == "CancelledError", raised
        assert freed, "the iterator of a request whose error was raised stayed alive"
