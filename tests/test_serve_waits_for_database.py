"""`sundial serve` started before its database is ready waits for it instead of exiting.

The database is put behind the fault proxy (tests/faults/proxy.py), which first refuses every
connection, as a database that is still starting does; once the server has said it is waiting,
the proxy lets connections through and the server must become ready.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.faults.proxy import FaultProxy
from tests.processes import (
    ROOT,
    SUNDIAL,
    assert_exited_cleanly,
    clean_env,
    free_port,
    sundial_serve,
    wait_ready,
)

WAITING = b"waiting for the database"


def wait_for_line(log: Path, line: bytes, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while line not in log.read_bytes():
        if process.poll() is not None:
            pytest.fail(f"server exited with {process.returncode}:\n{log.read_text()[-4000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"server never said {line!r}:\n{log.read_text()[-4000:]}")
        time.sleep(0.05)


@pytest.mark.slow
def test_serve_waits_for_a_database_that_is_still_starting(
    database_url: str, tmp_path: Path
) -> None:
    url = make_url(database_url)
    proxy = FaultProxy(url.host or "127.0.0.1", url.port or 5432)
    proxy.refuse(True)
    proxy.start()
    port = free_port()
    env = clean_env(
        SUNDIAL_DATABASE_URL=url.set(host="127.0.0.1", port=proxy.port).render_as_string(
            hide_password=False
        ),
        SUNDIAL_DATA_DIR=str(tmp_path / "data"),
        SUNDIAL_PORT=str(port),
        SUNDIAL_WORKERS="1",
    )
    log = tmp_path / "serve.log"
    try:
        with sundial_serve(env, log) as process:
            wait_for_line(log, WAITING, process)
            proxy.refuse(False)
            wait_ready(f"http://127.0.0.1:{port}", process, log)
    finally:
        proxy.stop()
    assert_exited_cleanly(process, log)


def test_serve_gives_up_with_a_clear_error_when_the_database_never_comes(
    tmp_path: Path,
) -> None:
    env = clean_env(
        SUNDIAL_DATABASE_URL=f"postgresql+psycopg://nobody@127.0.0.1:{free_port()}/none",
        SUNDIAL_DATA_DIR=str(tmp_path / "data"),
        SUNDIAL_STARTUP_TIMEOUT_SECONDS="1",
    )
    result = subprocess.run(
        [str(SUNDIAL), "serve"], cwd=ROOT, env=env, capture_output=True, timeout=60
    )
    assert result.returncode == 1
    assert b"did not accept connections within 1 s" in result.stderr, result.stderr
