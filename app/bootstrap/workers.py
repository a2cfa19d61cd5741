"""The server's worker processes, each accepting connections on a listening socket of its own.

uvicorn's workers share one listening socket: whichever worker's event loop wakes first accepts
a new connection, and with a handful of long-lived client connections one worker often ends up
with nearly all of them while the other idles (in the benchmark, one of two workers took almost
all of eight clients' connections in most runs). Here every worker listens on a socket of its
own, all bound to the same address with ``SO_REUSEPORT``, and the kernel spreads new
connections over them by a hash of each connection's addresses. uvicorn's supervisor still
starts, watches, restarts and stops the workers; a worker it restarts after a crash listens on
the supervisor's socket, itself bound with ``SO_REUSEPORT``, so it joins the others.
"""

from __future__ import annotations

import logging
import socket
import sys

import uvicorn
from uvicorn.supervisors.multiprocess import Multiprocess, Process

log = logging.getLogger("uvicorn.error")

STARTUP_FAILURE = 3
"""uvicorn's exit status when it cannot start."""


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` with ``SO_REUSEPORT`` (and ``SO_REUSEADDR``)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


class _OwnSocketProcess(Process):
    """A worker that listens on a socket of its own, made in the worker."""

    def target(self, sockets: list[socket.socket] | None = None) -> None:  # pragma: no cover
        own = listening_socket(self.config.host, self.config.port)
        for inherited in sockets or ():
            inherited.close()
        super().target([own])


class _SpreadingMultiprocess(Multiprocess):
    """uvicorn's supervisor, starting workers that listen on sockets of their own."""

    def init_processes(self) -> None:
        for _ in range(self.processes_num):
            process = _OwnSocketProcess(self.config, self.sockets)
            process.start()
            self.processes.append(process)


def run(config: uvicorn.Config) -> None:
    """Serve ``config`` (its app an import string): in one process, or in ``config.workers``
    processes that each accept on a socket of their own."""
    if config.workers <= 1:
        server = uvicorn.Server(config)
        server.run()
        if not server.started:
            sys.exit(STARTUP_FAILURE)
        return
    try:
        # Bound here first, so that an address in use fails at once, as uvicorn does.
        supervisor_socket = listening_socket(config.host, config.port)
    except OSError as error:
        log.error(error)
        sys.exit(STARTUP_FAILURE)
    _SpreadingMultiprocess(config, sockets=[supervisor_socket]).run()
