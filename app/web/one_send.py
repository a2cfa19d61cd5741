"""uvicorn's httptools protocol, answering with one socket write where it would make two.

uvicorn writes a response's status line and headers as soon as the application starts the
response, and its body when the application sends it: two ``send`` system calls, and two TCP
segments for the client to read, for every answer. :class:`OneSendHttpToolsProtocol` hands the
protocol a transport that gathers the writes of one event-loop turn and sends them together at
the end of that turn (``call_soon``): a whole answer, produced without an ``await`` that waits
in between, leaves in one write. A response streamed over several turns (the dashboard's live
page) still goes out as it is produced, each turn's writes together.

Run with ``uvicorn.run(..., http="app.web.one_send:OneSendHttpToolsProtocol")``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class GatheringTransport:
    """A transport whose writes wait for the end of the event-loop turn, then leave in one
    write (before anything that ends the connection); everything else is the transport's."""

    __slots__ = ("_loop", "_parts", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> None:
        """Queue ``data`` for this turn's write."""
        if not data:
            return
        if not self._parts:
            self._loop.call_soon(self.flush)
        self._parts.append(data)

    def flush(self) -> None:
        """Send what this turn wrote, in one write."""
        if not self._parts:
            return
        data = self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)
        self._parts.clear()
        if not self._transport.is_closing():
            self._transport.write(data)

    def close(self) -> None:
        """Send what is queued, then close (an answer before ``Connection: close``)."""
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        """Send what is queued, then end the stream."""
        self.flush()
        self._transport.write_eof()

    def get_write_buffer_size(self) -> int:
        """Bytes not yet sent, queued here included."""
        return self._transport.get_write_buffer_size() + sum(map(len, self._parts))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneSendHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol over a :class:`GatheringTransport`."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        gathering = GatheringTransport(transport, self.loop)
        super().connection_made(gathering)  # type: ignore[arg-type]  # duck-typed transport
