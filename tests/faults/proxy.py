"""An in-repo TCP proxy between the Sundial servers and PostgreSQL that injects network faults.

The servers are pointed at the proxy instead of the database; the proxy forwards every byte to
the real cluster and, on command:

- adds **latency**: every chunk read from either side is held ``latency`` seconds before it is
  written to the other side (one way; a round trip gains twice that). Order is kept, throughput
  is not throttled;
- **stalls**: stops forwarding in both directions while keeping every connection open, like a
  switch that silently drops packets; :meth:`FaultProxy.resume` lets the held bytes through;
- **cuts** every open connection at once (both sockets reset with ``SO_LINGER 0``), like a
  firewall or a failed-over load balancer;
- **refuses** new connections (accepted, then reset at once) for a partition that lasts.

It runs its own asyncio event loop in a daemon thread, so it keeps forwarding whatever the
caller's loop is doing; every control method is thread-safe and bounded in time. Listens on
127.0.0.1 only.

Example::

    proxy = FaultProxy("127.0.0.1", cluster.port)
    proxy.start()                       # proxy.port is the port to connect to
    proxy.set_latency(0.05)
    proxy.cut()                         # -> number of connections cut
    proxy.stop()
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

LISTEN_HOST = "127.0.0.1"
CHUNK = 65536
CONTROL_TIMEOUT = 10.0
UPSTREAM_CONNECT_TIMEOUT = 5.0


@dataclass
class ProxyStats:
    """What the proxy has seen since it started."""

    accepted: int = 0
    refused: int = 0
    upstream_failures: int = 0
    cut: int = 0
    bytes_forwarded: int = 0


class _Link:
    """One proxied connection: the client side, the upstream side and their two pumps."""

    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy
        self.tasks: list[asyncio.Task[None]] = []
        self.writers: list[asyncio.StreamWriter] = []
        self.closed = False

    def abort(self) -> None:
        """Reset both sockets now (RST, not FIN), dropping anything in flight."""
        if self.closed:
            return
        self.closed = True
        for writer in self.writers:
            _reset(writer)
        for task in self.tasks:
            task.cancel()

    async def pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Forward one direction, through a queue so that latency delays without throttling."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(maxsize=4096)

        async def deliver() -> None:
            while True:
                release_at, data = await queue.get()
                if not data:
                    break
                delay = release_at - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                await self.proxy.flowing()
                writer.write(data)
                await writer.drain()
                self.proxy.stats.bytes_forwarded += len(data)
            with contextlib.suppress(OSError, RuntimeError):
                if writer.can_write_eof():
                    writer.write_eof()

        sender = asyncio.create_task(deliver())
        try:
            while True:
                data = await reader.read(CHUNK)
                await queue.put((loop.time() + self.proxy.latency, data))
                if not data:
                    break
            await sender
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            sender.cancel()
            # Either side going away ends the whole link: PostgreSQL connections are not
            # half-duplex, and a server that sees EOF must also see its peer gone.
            self.close()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for writer in self.writers:
            with contextlib.suppress(OSError, RuntimeError):
                writer.close()
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()


def _reset(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError, RuntimeError):
        writer.transport.abort()


class FaultProxy:
    """A fault-injecting TCP proxy to ``target_host:target_port`` (see the module docstring)."""

    def __init__(self, target_host: str, target_port: int, listen_port: int = 0) -> None:
        self.target_host = target_host
        self.target_port = target_port
        self.port = listen_port
        self.latency = 0.0
        self.refusing = False
        self.stats = ProxyStats()
        self._links: set[_Link] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._flowing: asyncio.Event | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None

    # --- lifecycle (any thread) -------------------------------------------------------------

    def start(self) -> None:
        """Start the proxy thread and listen; :attr:`port` is set when this returns."""
        self._thread = threading.Thread(target=self._main, name="fault-proxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(CONTROL_TIMEOUT):
            raise RuntimeError("fault proxy did not start")
        if self._start_error is not None:
            raise RuntimeError("fault proxy did not start") from self._start_error

    def stop(self) -> None:
        """Close every connection and the listener, and end the thread."""
        if self._loop is None or self._thread is None:
            return
        with contextlib.suppress(RuntimeError, TimeoutError):
            self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(CONTROL_TIMEOUT)
        self._loop = None

    # --- faults (any thread) ----------------------------------------------------------------

    def set_latency(self, seconds: float) -> None:
        """Hold every chunk ``seconds`` (one way) before forwarding it; 0 turns it off."""
        self.latency = max(0.0, seconds)

    def stall(self) -> None:
        """Stop forwarding in both directions; connections stay open."""
        self._call(self._set_flowing(False))

    def resume(self) -> None:
        """Forward again (what was held goes through, in order)."""
        self._call(self._set_flowing(True))

    def cut(self) -> int:
        """Reset every open connection now; returns how many were cut."""
        return self._call(self._cut())

    def refuse(self, refusing: bool) -> None:
        """While true, new connections are reset as soon as they are accepted."""
        self.refusing = refusing

    @property
    def open_connections(self) -> int:
        """Connections being forwarded now."""
        return len(self._links)

    # --- inside the proxy thread ------------------------------------------------------------

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._listen())
        except OSError as error:  # cannot listen: reported to start()
            self._start_error = error
            self._ready.set()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _listen(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(
            self._accept, LISTEN_HOST, self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def flowing(self) -> None:
        """Return when forwarding is allowed (at once unless stalled)."""
        assert self._flowing is not None
        await self._flowing.wait()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            self.stats.refused += 1
            _reset(writer)
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(self.target_host, self.target_port),
                UPSTREAM_CONNECT_TIMEOUT,
            )
        except (OSError, TimeoutError):
            self.stats.upstream_failures += 1
            _reset(writer)
            return
        self.stats.accepted += 1
        link = _Link(self)
        link.writers = [writer, up_writer]
        self._links.add(link)
        link.tasks = [
            asyncio.create_task(link.pump(reader, up_writer)),
            asyncio.create_task(link.pump(up_reader, writer)),
        ]
        try:
            await asyncio.gather(*link.tasks, return_exceptions=True)
        finally:
            link.close()
            self._links.discard(link)

    async def _set_flowing(self, flowing: bool) -> None:
        assert self._flowing is not None
        if flowing:
            self._flowing.set()
        else:
            self._flowing.clear()

    async def _cut(self) -> int:
        links = list(self._links)
        for link in links:
            link.abort()
        self._links.clear()
        self.stats.cut += len(links)
        return len(links)

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._cut()
        assert self._flowing is not None
        self._flowing.set()

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise RuntimeError("fault proxy is not running")
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        return future.result(CONTROL_TIMEOUT)
