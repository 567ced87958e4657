"""What a Server shares with everything that serves it: its trace settings
(tritonserver._trace) and its shared memory regions
(tritonserver._shared_memory), each made at first use. The in-process
request path reads them here; the frontends and the serve command are
handed them by tritonserver._server's functions."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from tritonserver._shared_memory import SharedMemoryRegistry
    from tritonserver._trace import Tracing


class Registries:
    __slots__ = ("made_tracing", "_shared_memory")

    def __init__(self) -> None:
        # The trace settings once made, else None: read directly by the
        # request path's fastest case (tritonserver._submit.send_inputs),
        # where a call per request would cost more than its check.
        self.made_tracing: Optional[Tracing] = None
        self._shared_memory: Optional[SharedMemoryRegistry] = None

    def tracing(self) -> "Tracing":
        if self.made_tracing is None:
            from tritonserver._trace import Tracing

            self.made_tracing = Tracing()
        return self.made_tracing

    def active_tracing(self) -> Optional["Tracing"]:
        """The trace settings when they may sample a request (asked on every
        request: nothing is made here)."""
        tracing = self.made_tracing
        return tracing if tracing is not None and tracing.active else None

    def close_tracing(self) -> None:
        """Finish every trace (the settings end with the server)."""
        tracing, self.made_tracing = self.made_tracing, None
        if tracing is not None:
            tracing.close()

    def shared_memory(self) -> "SharedMemoryRegistry":
        if self._shared_memory is None:
            from tritonserver._shared_memory import SharedMemoryRegistry

            self._shared_memory = SharedMemoryRegistry()
        return self._shared_memory
