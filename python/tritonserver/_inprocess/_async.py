"""The event loop that runs models' coroutines: an ``async def execute``
returns one, and it runs here, on a thread of its own, while the instance
takes its next batch (as the python backend runs them on its stub's loop).
One loop per process, started at the first coroutine; its thread is a
daemon, so it never holds the interpreter's exit."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Callable, Coroutine, Optional

_lock = threading.Lock()
_loop: Optional[asyncio.AbstractEventLoop] = None


def _running_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="tritonserver-inprocess-async",
                                      daemon=True)
            thread.start()
            _loop = loop
        return _loop


def run(coroutine: Coroutine[Any, Any, Any],
        done: Callable[[Any, Optional[BaseException]], None]) -> None:
    """Run `coroutine` on the loop; then ``done(result, None)`` or
    ``done(None, exception)``, on the loop's thread."""

    def finished(future: concurrent.futures.Future[Any]) -> None:
        try:
            result = future.result()
        except BaseException as e:  # the model's exception, for its requests
            done(None, e)
            return
        done(result, None)

    asyncio.run_coroutine_threadsafe(coroutine, _running_loop()).add_done_callback(finished)
