"""A minimal sseclient (the sseclient-py distribution's module) for Triton's
QA scripts where the real one is not installed (run_qa.py puts this folder
on their PYTHONPATH only then; test.sh pip-installs sseclient-py).

qa/L0_http/generate_endpoint_test.py uses ``SSEClient(response)``, its
``events()`` (each event's ``data``) and ``_read()`` (the raw messages left
after the events were read: each must start with ``data:`` and end with a
blank line). A message ends at a blank line (LF LF, CR CR or CRLF CRLF), as
the server-sent events format says.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Optional

__version__ = "0.0-qa_check"

_ENDINGS = (b"\r\r", b"\n\n", b"\r\n\r\n")


@dataclass
class Event:
    """One server-sent event: its id, type, data and retry field."""

    id: Optional[str] = None
    event: str = "message"
    data: str = ""
    retry: Optional[int] = None


class SSEClient:
    """Events from an iterable of bytes chunks (a requests Response)."""

    def __init__(self, event_source: Iterable[bytes], char_enc: str = "utf-8"):
        self._event_source = event_source
        self._char_enc = char_enc
        self._chunks: Optional[Iterator[bytes]] = None

    def _read(self) -> Iterator[bytes]:
        """The raw messages, each with the blank line that ends it (the
        last one as it came where the stream ends without one)."""
        if self._chunks is None:
            self._chunks = iter(self._event_source)
        pending = b""
        for chunk in self._chunks:
            for line in chunk.splitlines(True):
                pending += line
                if pending.endswith(_ENDINGS):
                    yield pending
                    pending = b""
        if pending:
            yield pending

    def events(self) -> Iterator[Event]:
        for message in self._read():
            event = Event()
            data: list = []
            for line in message.decode(self._char_enc).splitlines():
                if not line or line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                if value.startswith(" "):
                    value = value[1:]
                if name == "data":
                    data.append(value)
                elif name == "event":
                    event.event = value
                elif name == "id":
                    event.id = value
                elif name == "retry" and value.isdigit():
                    event.retry = int(value)
            if not data:
                continue
            event.data = "\n".join(data)
            yield event

    def close(self) -> None:
        close = getattr(self._event_source, "close", None)
        if close is not None:
            close()
