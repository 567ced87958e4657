"""The event loops that run models' coroutines: an ``async def execute``
returns one, and it runs on its instance's loop, a thread of its own, while
the instance takes its next batch. One loop per model instance, as the
python backend runs one per stub: a model that blocks its loop (iterating
a BLS call's responses) blocks no other model's. A loop starts at its
instance's first coroutine and stops when the instance is finalized; its
thread is a daemon, so it never holds the interpreter's exit."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Callable, Coroutine, Optional

# How long finalizing an instance waits for its loop's thread to end (a
# coroutine the model left blocking it keeps it: then it stays, a daemon).
STOP_WAIT_S = 5.0

_lock = threading.Lock()
_loops: dict[Any, tuple[asyncio.AbstractEventLoop, threading.Thread]] = {}


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
        loop.run_until_complete(loop.shutdown_default_executor())  # async_exec's workers
    finally:
        loop.close()


def _loop_of(key: Any) -> asyncio.AbstractEventLoop:
    with _lock:
        found = _loops.get(key)
        if found is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=_serve, args=(loop,), daemon=True,
                                      name="tritonserver-inprocess-async")
            thread.start()
            found = _loops[key] = (loop, thread)
        return found[0]


def run(key: Any, coroutine: Coroutine[Any, Any, Any],
        done: Callable[[Any, Optional[BaseException]], None]) -> None:
    """Run `coroutine` on the loop of `key` (a model instance); then
    ``done(result, None)`` or ``done(None, exception)``, on that loop's
    thread."""

    def finished(future: concurrent.futures.Future[Any]) -> None:
        try:
            result = future.result()
        except BaseException as e:  # the model's exception, for its requests
            done(None, e)
            return
        done(result, None)

    asyncio.run_coroutine_threadsafe(coroutine, _loop_of(key)).add_done_callback(finished)


def stop(key: Any) -> None:
    """Stop the loop of `key`, if it has one (its instance is finalized:
    none of its batches is in flight)."""
    with _lock:
        found = _loops.pop(key, None)
    if found is None:
        return
    loop, thread = found
    loop.call_soon_threadsafe(loop.stop)
    if thread is not threading.current_thread():
        thread.join(STOP_WAIT_S)
