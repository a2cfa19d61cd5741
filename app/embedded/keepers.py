"""The processes of a formation: each data directory's ``pg_autoctl run`` keeper (which runs
its PostgreSQL), started detached and found, stopped, killed or frozen through ``/proc``; and
``pg_autoctl`` itself, run as the server account in the formation's own environment.

:class:`app.embedded.formation.Formation` decides what runs when; this module runs it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from app.embedded.errors import FormationError
from app.embedded.privileges import server_env
from app.embedded.processes import alive, children, command_lines, read_pid, with_environment
from app.embedded.programs import ServerPrograms

_INSTALL_HINT = (
    "pg_autoctl not found: install pg_auto_failover, e.g. "
    "`apt-get install pg-auto-failover-cli postgresql-<major>-auto-failover`"
)


class Keepers:
    """The keepers of the monitor and nodes under ``base_dir``.

    Args:
        base_dir: The formation's directory (its layout: :mod:`app.embedded.formation`).
        programs: Who runs the programs, and where the PostgreSQL binaries are.
    """

    def __init__(self, base_dir: Path, programs: ServerPrograms) -> None:
        self.base_dir = base_dir
        self._programs = programs

    def data_dir(self, name: str) -> Path:
        """The data directory of ``monitor`` or a node."""
        return self.base_dir / name

    def log_file(self, name: str) -> Path:
        """The log of the keeper (and PostgreSQL) of ``monitor`` or a node."""
        return self.base_dir / "logs" / f"{name}.log"

    # --- one keeper ---------------------------------------------------------------------------

    def start(self, name: str) -> None:
        """``pg_autoctl run`` for ``name``, detached: a shell starts it in the background and
        exits, so the keeper outlives this process and is never left a zombie of it."""
        account = self._programs.account
        log = self.log_file(name)
        self._remove_stale_pid_files(name)
        argv = [self._pg_autoctl(), "run", "--pgdata", str(self.data_dir(name))]
        subprocess.run(
            ["/bin/sh", "-c", 'exec "$@" </dev/null >>"$LOG" 2>&1 &', "sh", *argv],
            env={**self._env(), "LOG": str(log)},
            check=True,
            start_new_session=True,
            **account.subprocess_kwargs(),
        )

    def running(self, name: str) -> bool:
        """Whether the keeper of ``name`` runs."""
        return self._keeper_pid(name) is not None

    def stop(self, name: str, *, timeout: float) -> None:
        """Stop the keeper of ``name`` and its PostgreSQL cleanly (a fast shutdown)."""
        if not self.running(name):
            return
        self.autoctl("stop", "--pgdata", str(self.data_dir(name)), timeout=timeout)
        deadline = time.monotonic() + timeout
        while self.running(name) or self.postmaster_pid(name) is not None:
            if time.monotonic() > deadline:
                raise FormationError(f"{name} did not stop within {timeout:.0f} s")
            time.sleep(0.05)

    def kill(self, name: str) -> None:
        """SIGKILL the keeper of ``name``, its PostgreSQL and every backend, and wait (up to
        10 s) until they are gone."""
        pids: list[int] = []
        keeper = self._keeper_pid(name)
        if keeper is not None:
            pids += [keeper, *children(keeper)]
        postmaster = self.postmaster_pid(name)
        if postmaster is not None:
            pids += [postmaster, *children(postmaster)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.02)

    def signal_postgres(self, name: str, signum: signal.Signals) -> None:
        """Send ``signum`` to the PostgreSQL of ``name`` and every process it started."""
        postmaster = self.postmaster_pid(name)
        if postmaster is None:
            raise FormationError(f"the PostgreSQL of {name} is not running")
        for pid in (postmaster, *children(postmaster)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def postmaster_pid(self, name: str) -> int | None:
        """The PostgreSQL server of ``name``, if it is alive."""
        pid = read_pid(self.data_dir(name) / "postmaster.pid")
        return pid if pid is not None and alive(pid) else None

    # --- all of them --------------------------------------------------------------------------

    def processes(self) -> list[int]:
        """Every live process whose environment names this formation's XDG_CONFIG_HOME (the
        keepers, their helpers and their PostgreSQL servers)."""
        return with_environment(f"XDG_CONFIG_HOME={self.base_dir / 'xdg' / 'config'}")

    def autoctl(self, *args: str, timeout: float) -> str:
        """Run ``pg_autoctl <args>`` to its end; its standard output.

        Raises:
            FormationError: it failed, or did not end within ``timeout`` seconds.
        """
        account = self._programs.account
        try:
            done = subprocess.run(
                [self._pg_autoctl(), *args],
                env=self._env(),
                cwd=self.base_dir,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                **account.subprocess_kwargs(),
            )
        except subprocess.TimeoutExpired as error:
            raise FormationError(f"pg_autoctl {' '.join(args)} timed out") from error
        if done.returncode != 0:
            raise FormationError(
                f"pg_autoctl {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-3000:]}"
            )
        return done.stdout

    # --- helpers ------------------------------------------------------------------------------

    def _remove_stale_pid_files(self, name: str) -> None:
        """The keeper's and PostgreSQL's pid files of ``name``, where they name a process that
        is dead. A killed process lingers as a zombie until something reaps it, and while it
        does, pg_autoctl takes the pid file for a keeper or a PostgreSQL still running: it would
        refuse to start, or never start PostgreSQL. A machine that lost power has no zombies."""
        relative = self.data_dir(name).relative_to("/")
        pid_files = (
            self.base_dir / "xdg" / "run" / "pg_autoctl" / relative / "pg_autoctl.pid",
            self.data_dir(name) / "postmaster.pid",
        )
        for pid_file in pid_files:
            pid = read_pid(pid_file)
            if pid is not None and not alive(pid):
                pid_file.unlink(missing_ok=True)

    def _keeper_pid(self, name: str) -> int | None:
        """The supervisor ``pg_autoctl run --pgdata <dir>`` of ``name``, found in /proc."""
        wanted = ["run", "--pgdata", str(self.data_dir(name))]
        for pid, argv in command_lines():
            is_keeper = os.path.basename(argv[0]) == "pg_autoctl" and argv[1:4] == wanted
            if is_keeper and alive(pid):
                return pid
        return None

    def _env(self) -> dict[str, str]:
        env = server_env(self._programs.account)
        env["PATH"] = f"{self._programs.bindir}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
        env["XDG_CONFIG_HOME"] = str(self.base_dir / "xdg" / "config")
        env["XDG_DATA_HOME"] = str(self.base_dir / "xdg" / "share")
        env["XDG_RUNTIME_DIR"] = str(self.base_dir / "xdg" / "run")
        # pg_autoctl's initdb takes the encoding from the locale: without one, SQL_ASCII.
        env["LC_ALL"] = env["LANG"] = "C.UTF-8"
        return env

    def _pg_autoctl(self) -> str:
        found = shutil.which("pg_autoctl") or shutil.which(
            "pg_autoctl", path=str(self._programs.bindir)
        )
        if found is None:
            raise FormationError(_INSTALL_HINT)
        return found
