"""What the workers whose systems are either a model in this process or the
same model behind ``python -m tritonserver serve`` with tritonclient over
HTTP share (tsbench/inprocess_worker.py, tsbench/tracing_worker.py): the
calls, the check and the close, sent to whichever it is."""

from __future__ import annotations

import contextlib
from typing import Any, Optional

import numpy as np

from tsbench import api_calls, loops


class LocalOrServed(loops.System):
    """A system on ``self.model`` (a tritonserver Model of ``self.server``),
    or, when ``self.serving`` is set, on (a ServeServer, its TritonClient)."""

    name = ""
    server: Any = None
    model: Any = None
    serving: Optional[tuple] = None

    def sync_call(self, x: np.ndarray) -> loops.Call:
        if self.serving is not None:
            return self.serving[1].sync_call(x)
        return api_calls.infer_call(self.model, x)

    def thread_call_factories(self, x: np.ndarray, n: int) -> list:
        return [lambda: self.sync_call(x)] * n

    @contextlib.asynccontextmanager
    async def async_session(self, x: np.ndarray):
        if self.serving is not None:
            async with self.serving[1].async_session(x) as call:
                yield call
            return
        yield api_calls.async_infer_call(self.model, x)

    def verify(self, x: np.ndarray) -> None:
        if self.serving is not None:
            self.serving[1].verify(x)
            return
        y = api_calls.output(self.model, x)
        if y.dtype != np.float32 or not np.array_equal(y, x):
            raise SystemExit(f"{self.name}: the output differs from the input")

    def close(self) -> None:
        if self.serving is not None:
            self.serving[1].close()
            self.serving[0].stop()
        else:
            self.server.stop()


def served(repository: str, log: str, extra: list) -> tuple:
    """(a ServeServer on ``repository`` with ``extra`` flags, started; a
    tritonclient HTTP client of it)."""
    from tsbench.client_worker import TritonClient
    from tsbench.serve_server import ServeServer

    server = ServeServer(repository, log, extra=extra).start()
    try:
        return server, TritonClient("http", server.http_url)
    except BaseException:
        server.stop()
        raise
