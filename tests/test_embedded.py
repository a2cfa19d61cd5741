"""Tests for app.embedded against real PostgreSQL servers (no mocks)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy

from app.embedded import (
    ClusterError,
    LocalCluster,
    PostgresNotFound,
    ensure_accessible,
    find_postgres_bindir,
    get_pg_account,
    is_root,
)
from tests.pg import start_test_postgres

PROJECT_ROOT = Path(__file__).resolve().parent.parent
root_only = pytest.mark.skipif(not is_root(), reason="needs root")


@pytest.fixture(scope="module")
def scratch() -> Iterator[Path]:
    """A world-traversable temporary directory (so nothing needs chmod o+x)."""
    path = Path(tempfile.mkdtemp(prefix="sundial-embedded-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(scratch: Path) -> Iterator[LocalCluster]:
    """One running cluster shared by the tests of this module."""
    cluster = LocalCluster(scratch / "shared")
    cluster.start()
    yield cluster
    cluster.stop()


def _execute(cluster: LocalCluster, statement: str) -> list[tuple[object, ...]]:
    with psycopg.connect(cluster.libpq_dsn, autocommit=True) as conn:
        cursor = conn.execute(statement)
        return cursor.fetchall() if cursor.description else []


def _postmaster_pid(cluster: LocalCluster) -> int:
    return int((cluster.data_dir / "postmaster.pid").read_text().split()[0])


def _processes_in(directory: Path) -> list[int]:
    """Pids of processes whose working directory is ``directory`` (Linux)."""
    target = str(directory.resolve())
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "cwd") == target:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


# --------------------------------------------------------------- binaries


def test_find_postgres_bindir_contains_server_binaries() -> None:
    bindir = find_postgres_bindir()

    assert (bindir / "initdb").is_file()
    assert (bindir / "postgres").is_file()


def test_explicit_override_is_used() -> None:
    bindir = find_postgres_bindir()

    assert find_postgres_bindir(bindir) == bindir


def test_bogus_override_explains_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(PostgresNotFound) as excinfo:
        find_postgres_bindir(tmp_path / "no-such-dir")

    message = str(excinfo.value)
    assert "apt-get install -y postgresql" in message
    assert "SUNDIAL_PG_BINDIR" in message
    assert isinstance(excinfo.value, RuntimeError)


# ---------------------------------------------------------------- cluster


def test_urls_point_at_the_private_cluster(cluster: LocalCluster) -> None:
    port = cluster.port

    assert cluster.host == "127.0.0.1"
    assert port != 5432
    assert cluster.sqlalchemy_url == f"postgresql+psycopg://sundial@127.0.0.1:{port}/sundial"
    assert cluster.libpq_dsn == f"host=127.0.0.1 port={port} user=sundial dbname=sundial"
    engine = sqlalchemy.create_engine(cluster.sqlalchemy_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sqlalchemy.text("SELECT current_database()")).scalar() == "sundial"
    finally:
        engine.dispose()


def test_the_local_url_goes_through_the_unix_socket(cluster: LocalCluster) -> None:
    assert cluster.socket_dir == cluster.run_dir
    url = sqlalchemy.engine.make_url(cluster.local_sqlalchemy_url)
    expected = {"host": str(cluster.run_dir), "port": str(cluster.port)}
    assert (url.host, url.query) == (None, expected)
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            # A unix-socket connection has no client address.
            query = "SELECT current_database(), inet_client_addr() IS NULL"
            assert tuple(conn.execute(sqlalchemy.text(query)).one()) == ("sundial", True)
    finally:
        engine.dispose()


def test_a_socket_path_too_long_for_unix_sockets_falls_back_to_tcp(tmp_path: Path) -> None:
    deep = LocalCluster(tmp_path / ("d" * 120), port=54329)
    assert deep.socket_dir is None
    assert deep.local_sqlalchemy_url == deep.sqlalchemy_url


def test_server_is_durable_and_local_only(cluster: LocalCluster) -> None:
    settings = dict(
        _execute(
            cluster,
            "SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit',"
            " 'full_page_writes', 'listen_addresses', 'max_connections',"
            " 'unix_socket_directories', 'server_encoding')",
        )
    )

    assert settings == {
        "fsync": "on",
        "synchronous_commit": "on",
        "full_page_writes": "on",
        "listen_addresses": "127.0.0.1",
        "max_connections": "200",
        "unix_socket_directories": str(cluster.run_dir),
        "server_encoding": "UTF8",
    }


def test_data_survives_stop_and_start(cluster: LocalCluster) -> None:
    cluster.start()
    _execute(cluster, "CREATE TABLE persisted (v text)")
    _execute(cluster, "INSERT INTO persisted VALUES ('kept')")

    cluster.stop()
    assert not cluster.is_running()
    cluster.start()

    assert cluster.is_running()
    assert _execute(cluster, "SELECT v FROM persisted") == [("kept",)]


def test_start_while_running_is_a_noop(cluster: LocalCluster) -> None:
    cluster.start()
    pid, port = _postmaster_pid(cluster), cluster.port

    cluster.start()
    LocalCluster(cluster.base_dir).start()

    assert _postmaster_pid(cluster) == pid
    assert cluster.port == port


def test_immediate_restart_recovers_committed_data(cluster: LocalCluster) -> None:
    cluster.start()
    _execute(cluster, "CREATE TABLE crash (v int)")
    _execute(cluster, "INSERT INTO crash SELECT generate_series(1, 1000)")

    cluster.restart(mode="immediate")

    assert _execute(cluster, "SELECT count(*) FROM crash") == [(1000,)]
    assert "not properly shut down" in cluster.log_file.read_text()


def test_killed_server_leaves_no_obstacle(cluster: LocalCluster) -> None:
    cluster.start()
    _execute(cluster, "CREATE TABLE killed (v int)")
    _execute(cluster, "INSERT INTO killed VALUES (7)")

    os.kill(_postmaster_pid(cluster), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _processes_in(cluster.data_dir) and time.monotonic() < deadline:
        time.sleep(0.05)  # wait for the orphaned backends to notice and exit
    assert (cluster.data_dir / "postmaster.pid").exists()
    assert not cluster.is_running()

    cluster.start()

    assert _execute(cluster, "SELECT v FROM killed") == [(7,)]


def test_taken_port_is_replaced_and_stored(cluster: LocalCluster) -> None:
    cluster.start()
    old_port = cluster.port
    cluster.stop()

    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", old_port))
        squatter.listen()
        cluster.start()

    stored = json.loads((cluster.base_dir / "cluster.json").read_text())["port"]
    assert cluster.port != old_port
    assert stored == cluster.port
    assert LocalCluster(cluster.base_dir).port == cluster.port
    assert _execute(cluster, "SELECT 1") == [(1,)]


def test_explicit_port_that_is_taken_is_an_error(scratch: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        other = LocalCluster(scratch / "explicit", port=taken)
        other.ensure_initialized()

        with pytest.raises(ClusterError, match="in use"):
            other.start()


def test_unknown_stop_mode_is_rejected(cluster: LocalCluster) -> None:
    with pytest.raises(ClusterError, match="unknown stop mode"):
        cluster.stop(mode="gentle")


def test_concurrent_starts_run_initdb_once(scratch: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="sundial.embedded")
    base_dir = scratch / "concurrent"
    clusters = [LocalCluster(base_dir), LocalCluster(base_dir)]
    errors: list[Exception] = []

    def start(c: LocalCluster) -> None:
        try:
            c.start()
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(c,)) for c in clusters]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        initdb_runs = [r for r in caplog.records if r.getMessage().startswith("initialised")]
        assert len(initdb_runs) == 1
        assert clusters[0].port == clusters[1].port
    finally:
        clusters[0].stop()


# ------------------------------------------------------------- privileges


@root_only
def test_ensure_accessible_adds_only_execute_for_others(
    scratch: Path, caplog: pytest.LogCaptureFixture
) -> None:
    account = get_pg_account()
    closed = scratch / "closed"
    target = closed / "inner" / "pgdata"
    target.mkdir(parents=True)
    closed.chmod(0o700)

    changed = ensure_accessible(target, account)

    assert changed == [closed]
    assert stat.S_IMODE(closed.stat().st_mode) == 0o701
    assert str(closed) in caplog.text
    assert ensure_accessible(target, account) == []


# ----------------------------------------------------------- tests/pg.py


def test_test_postgres_wrapper_starts_and_cleans_up() -> None:
    pg = start_test_postgres()
    try:
        assert pg.url().startswith("postgresql+psycopg://postgres@127.0.0.1:")
        with psycopg.connect(pg.dsn()) as conn:
            row = conn.execute("SELECT current_database(), current_setting('fsync')").fetchone()
        assert row == ("test", "off")
    finally:
        pg.stop()

    assert not os.path.exists(pg.base_dir)
