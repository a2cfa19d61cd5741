"""The gathering transport under uvicorn's protocol: what one event-loop turn writes leaves in
one write, at the end of that turn; a later turn's writes leave separately; closing (or ending
the stream) sends what is queued first. (The client tests' server, like ``sundial serve``,
answers every request through it.)"""

from __future__ import annotations

import asyncio
from typing import Any

from app.web.one_send import GatheringTransport


class RecordingTransport(asyncio.Transport):
    """A transport that records what is written to it, and its closing."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.events: list[str] = []
        self.closing = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))
        self.events.append("write")

    def close(self) -> None:
        self.closing = True
        self.events.append("close")

    def write_eof(self) -> None:
        self.events.append("eof")

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 0


async def next_turn() -> None:
    await asyncio.sleep(0)


async def test_one_turns_writes_leave_together() -> None:
    real = RecordingTransport()
    gathering = GatheringTransport(real, asyncio.get_running_loop())
    gathering.write(b"HTTP/1.1 200 OK\r\n\r\n")
    gathering.write(b"")
    gathering.write(b'{"ok": true}')
    assert real.writes == []
    assert gathering.get_write_buffer_size() == len(b"HTTP/1.1 200 OK\r\n\r\n" + b'{"ok": true}')
    await next_turn()
    assert real.writes == [b'HTTP/1.1 200 OK\r\n\r\n{"ok": true}']
    gathering.write(b"more")
    await next_turn()
    assert real.writes[1:] == [b"more"]


async def test_closing_sends_what_is_queued_first() -> None:
    real = RecordingTransport()
    gathering = GatheringTransport(real, asyncio.get_running_loop())
    gathering.write(b"answer")
    gathering.close()
    assert real.events == ["write", "close"]
    assert real.writes == [b"answer"]
    await next_turn()
    assert real.writes == [b"answer"]  # nothing sent twice
    other = RecordingTransport()
    ending = GatheringTransport(other, asyncio.get_running_loop())
    ending.write(b"last")
    ending.write_eof()
    assert other.events == ["write", "eof"]
    assert ending.is_closing() is False  # the rest is the transport's own
