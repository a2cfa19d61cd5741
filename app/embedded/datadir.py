"""One PostgreSQL data directory and the server that runs on it, driven by ``initdb`` and
``pg_ctl`` as the server account: create it, start and stop its server, tell whether that
server runs (a recycled pid is not mistaken for it), and clear the lock files a killed one left.

:class:`app.embedded.LocalCluster` decides where the directory lives, which port and settings
its server gets, and serialises the calls; this module only runs the programs.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

from app.embedded.errors import ClusterError
from app.embedded.ports import HOST
from app.embedded.privileges import PgAccount, prepare_owned_dir, run_as
from app.embedded.processes import PROC, read_pid, working_dir
from app.embedded.programs import ServerPrograms

logger = logging.getLogger("sundial.embedded")

_LOCALES = ("C.UTF-8", "C")
_LOG_TAIL_LINES = 40
_COMMAND_GRACE = 30.0  # extra seconds for a pg_ctl call beyond its own -t timeout


class DataDirectory:
    """The data directory ``data_dir`` and its server.

    Args:
        data_dir: ``PGDATA``.
        workdir: The directory the programs run in; it also holds initdb's scratch directory.
        log_file: The server log written by ``pg_ctl -l``.
        programs: Who runs the programs, and where they are.
        user: The superuser name chosen at initdb time.
    """

    def __init__(
        self, data_dir: Path, *, workdir: Path, log_file: Path, programs: ServerPrograms, user: str
    ) -> None:
        self.data_dir = data_dir
        self._workdir = workdir
        self._log_file = log_file
        self._programs = programs
        self._user = user

    # ------------------------------------------------------------------ initdb

    def exists(self) -> bool:
        """Whether initdb has created the directory (it holds ``PG_VERSION``)."""
        return (self.data_dir / "PG_VERSION").exists()

    def initdb(self, account: PgAccount) -> None:
        """Run initdb into a scratch directory and rename it into place.

        The rename makes a half-done initdb (e.g. killed) harmless: it is redone.
        """
        if self.data_dir.exists():
            if any(self.data_dir.iterdir()):
                raise ClusterError(
                    f"{self.data_dir} exists but is not a PostgreSQL data directory "
                    "(no PG_VERSION); move it away or choose another directory"
                )
            self.data_dir.rmdir()
        scratch = self._workdir / f"{self.data_dir.name}.initdb"
        last_error = ""
        for locale in _LOCALES:
            shutil.rmtree(scratch, ignore_errors=True)
            prepare_owned_dir(scratch, account)
            result = run_as(
                account,
                self._initdb_argv(scratch, locale),
                cwd=self._workdir,
                timeout=300,
            )
            if result.returncode == 0:
                scratch.rename(self.data_dir)
                logger.info(
                    "initialised PostgreSQL cluster in %s (locale %s)", self.data_dir, locale
                )
                return
            last_error = (result.stderr or result.stdout).strip()
            if "locale" not in last_error.lower():
                break
            logger.info("initdb with locale %s failed, trying the next one", locale)
        shutil.rmtree(scratch, ignore_errors=True)
        raise ClusterError(f"initdb failed for {self.data_dir}:\n{last_error}")

    def _initdb_argv(self, data_dir: Path, locale: str) -> list[str]:
        return [
            str(self._programs.bindir / "initdb"),
            "-D",
            str(data_dir),
            "-U",
            self._user,
            "-E",
            "UTF8",
            f"--locale={locale}",
            "--auth=trust",
            "--no-instructions",
        ]

    # ----------------------------------------------------------------- pg_ctl

    def start(self, port: int, options: str, timeout: float) -> None:
        """``pg_ctl start`` with the postgres ``options`` (a shell-quoted string), waiting up
        to ``timeout`` seconds for the server to accept connections.

        Raises:
            ClusterError: The server did not start; the message has the log tail.
        """
        seconds = max(1, round(timeout))
        result = self._pg_ctl(
            "start",
            "-w",
            "-t",
            str(seconds),
            "-l",
            str(self._log_file),
            "-o",
            options,
            timeout=seconds + _COMMAND_GRACE,
        )
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip()
            raise ClusterError(
                f"PostgreSQL in {self.data_dir} did not start (pg_ctl exit {result.returncode}):"
                f"\n{output}\n--- last lines of {self._log_file} ---\n{self.log_tail()}"
            )
        logger.info("PostgreSQL started on %s:%d (data in %s)", HOST, port, self.data_dir)

    def stop(self, mode: str, timeout: float) -> None:
        """``pg_ctl stop -m mode`` if the server runs, waiting up to ``timeout`` seconds.

        Raises:
            ClusterError: The server did not stop.
        """
        if not self.is_running():
            return
        seconds = max(1, round(timeout))
        result = self._pg_ctl(
            "stop", "-m", mode, "-w", "-t", str(seconds), timeout=seconds + _COMMAND_GRACE
        )
        if result.returncode != 0:
            output = (result.stdout + result.stderr).strip()
            raise ClusterError(
                f"PostgreSQL in {self.data_dir} did not stop (mode {mode}):\n{output}\n"
                f"--- last lines of {self._log_file} ---\n{self.log_tail()}"
            )
        logger.info("PostgreSQL in %s stopped (mode %s)", self.data_dir, mode)

    def _pg_ctl(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """Run ``pg_ctl <args> -D <data_dir>`` as the server account."""
        argv = [str(self._programs.bindir / "pg_ctl"), *args, "-D", str(self.data_dir)]
        return run_as(self._programs.account, argv, cwd=self._workdir, timeout=timeout)

    # ------------------------------------------------------- the running server

    def is_running(self) -> bool:
        """Tell whether a server is running on this data directory.

        On Linux the process named in ``postmaster.pid`` must exist, not be a
        zombie and have this data directory as its working directory, so a
        recycled pid is not mistaken for our server. Elsewhere ``pg_ctl status``
        decides.
        """
        pid = read_pid(self.data_dir / "postmaster.pid")
        if pid is None:
            return False
        if not PROC.is_dir():
            return self._pg_ctl("status", timeout=_COMMAND_GRACE).returncode == 0
        return self._is_our_postmaster(pid)

    def running_port(self) -> int | None:
        """Return the port recorded in ``postmaster.pid`` (4th line), if readable."""
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
            return int(lines[3])
        except (OSError, IndexError, ValueError):
            return None

    def remove_stale_lock_files(self, socket_dir: Path) -> None:
        """Delete lock files left by a killed server.

        ``postmaster.pid`` and the socket lock ``<socket_dir>/.s.PGSQL.<port>.lock`` name
        the server pid. PostgreSQL ignores them when that pid is dead, but not
        when it is a zombie (unreaped by a container's init) or was recycled by
        another process of the same user. Removing them is safe once our server is
        known not to run: the server's shared-memory interlock still refuses to
        start while processes of the old server are alive.
        """
        if not PROC.is_dir():
            return
        for lock_file in [self.data_dir / "postmaster.pid", *socket_dir.glob(".s.PGSQL.*.lock")]:
            pid = read_pid(lock_file)
            if pid is None or self._is_our_postmaster(pid):
                continue
            logger.warning("removing stale %s (server pid %d is not running)", lock_file, pid)
            lock_file.unlink(missing_ok=True)

    def log_tail(self) -> str:
        """The last lines of the server log, for error messages."""
        try:
            lines = self._log_file.read_text(errors="replace").splitlines()
        except OSError as exc:
            return f"(log unavailable: {exc})"
        return "\n".join(lines[-_LOG_TAIL_LINES:])

    def _is_our_postmaster(self, pid: int) -> bool:
        """Tell whether ``pid`` is a live process working in our data directory.

        The postmaster changes into its data directory at startup; a zombie or a
        process of someone else has no readable matching ``cwd``.
        """
        cwd = working_dir(pid)
        return cwd is not None and cwd == self.data_dir.resolve()
