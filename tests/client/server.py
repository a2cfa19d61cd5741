"""A real Sundial server for client tests: the app under uvicorn on a real socket, in a thread
with its own event loop, on the test's database, with the background scheduler running."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from app.bootstrap.server import create_app
from tests.api.conftest import make_settings
from tests.processes import free_port

START_TIMEOUT = 30.0


@contextmanager
def running_server(database_url: str, **settings: Any) -> Iterator[str]:
    """Serve ``database_url`` at http://127.0.0.1:<port>; yields the root URL."""
    app = create_app(
        make_settings(
            database_url,
            **{
                "scheduler_enabled": True,
                "scheduler_tick_seconds": 0.05,
                "max_payload_bytes": 64 * 1024,
                "max_body_bytes": 1024 * 1024,
                **settings,
            },
        )
    )
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        http="app.web.one_send:OneSendHttpToolsProtocol",  # as `sundial serve` answers
    )
    server = uvicorn.Server(config)
    started = threading.Event()
    original_startup = server.startup

    async def startup(sockets: Any = None) -> None:
        await original_startup(sockets)
        started.set()

    server.startup = startup  # type: ignore[method-assign]
    thread = threading.Thread(target=server.run, name="sundial-test-server", daemon=True)
    thread.start()
    try:
        assert started.wait(START_TIMEOUT), "the test server did not start"
        assert server.started, "the test server failed to start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
