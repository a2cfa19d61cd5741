"""Run the PostgreSQL server programs as an unprivileged user when we are root.

``initdb``, ``pg_ctl`` and ``postgres`` refuse to run as root, yet Sundial is often
started as root (containers, CI). When the current process is root, the server
programs are run as the OS user ``postgres`` if it exists, otherwise as a system
user ``sundial-pg`` that is created on first use. The user switch uses the
``user=``/``group=``/``extra_groups=`` arguments of :mod:`subprocess`, so no
``su``/``sudo`` is needed.

When the current process is not root, everything runs as the current user and
nothing here changes ownership or permissions.
"""

from __future__ import annotations

import logging
import os
import pwd
import shutil
import stat
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

__all__ = [
    "FALLBACK_USER",
    "PREFERRED_USER",
    "PgAccount",
    "PrivilegeError",
    "RunAsKwargs",
    "chown_tree",
    "ensure_accessible",
    "get_pg_account",
    "is_root",
    "prepare_owned_dir",
    "run_as",
    "server_env",
]

logger = logging.getLogger("sundial.embedded")

PREFERRED_USER = "postgres"
FALLBACK_USER = "sundial-pg"


class PrivilegeError(RuntimeError):
    """Raised when the unprivileged user cannot be found, created or given access."""


class RunAsKwargs(TypedDict, total=False):
    """Keyword arguments for :mod:`subprocess` that switch to another user."""

    user: int
    group: int
    extra_groups: list[int]


@dataclass(frozen=True)
class PgAccount:
    """The OS account that runs the PostgreSQL server programs.

    Attributes:
        name: Login name.
        uid: User id.
        gid: Primary group id.
        groups: All group ids of the user (primary and supplementary).
        home: Home directory (it may not exist).
        switch: True if commands must switch to this user (we are root and it is
            not us); False if they run as the current process user.
    """

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    home: str
    switch: bool

    def subprocess_kwargs(self) -> RunAsKwargs:
        """Return the ``subprocess`` keyword arguments that run a command as this user.

        Returns:
            ``user``/``group``/``extra_groups`` when a switch is needed, else ``{}``.
        """
        if not self.switch:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}


def is_root() -> bool:
    """Tell whether the current process runs with effective uid 0.

    Returns:
        True when running as root.
    """
    return os.geteuid() == 0


def get_pg_account(
    preferred: str = PREFERRED_USER, fallback: str = FALLBACK_USER, *, create: bool = True
) -> PgAccount:
    """Return the account that runs the PostgreSQL programs.

    Not root: the current user. Root: ``preferred`` if it exists, else
    ``fallback``, which is created as a system user if missing and ``create``.

    Args:
        preferred: The user to use if it exists.
        fallback: The system user to use (and create) otherwise.
        create: Whether the fallback user may be created.

    Returns:
        The account.

    Raises:
        PrivilegeError: Running as root and no usable user exists or can be created.
    """
    if not is_root():
        return _account(pwd.getpwuid(os.geteuid()), switch=False)
    for name in (preferred, fallback):
        entry = _lookup(name)
        if entry is not None:
            return _account(entry, switch=entry.pw_uid != os.geteuid())
    if not create:
        raise PrivilegeError(f"neither user {preferred!r} nor {fallback!r} exists")
    return _account(_create_system_user(fallback), switch=True)


def _lookup(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def _account(entry: pwd.struct_passwd, *, switch: bool) -> PgAccount:
    groups = tuple(dict.fromkeys([entry.pw_gid, *os.getgrouplist(entry.pw_name, entry.pw_gid)]))
    return PgAccount(
        name=entry.pw_name,
        uid=entry.pw_uid,
        gid=entry.pw_gid,
        groups=groups,
        home=entry.pw_dir,
        switch=switch,
    )


def _nologin_shell() -> str:
    for shell in ("/usr/sbin/nologin", "/sbin/nologin"):
        if os.path.exists(shell):
            return shell
    return "/bin/false"


def _create_system_user(name: str) -> pwd.struct_passwd:
    useradd = shutil.which("useradd")
    if useradd is None:
        raise PrivilegeError(
            f"PostgreSQL cannot run as root and there is no user {name!r} to run it as; "
            f"`useradd` is not available. Create a system user named {name!r} "
            "(or 'postgres') and try again."
        )
    argv = [
        useradd,
        "--system",
        "--user-group",
        "--no-create-home",
        "--shell",
        _nologin_shell(),
        name,
    ]
    logger.warning("running as root: creating system user %r to run PostgreSQL", name)
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    entry = _lookup(name)  # another process may have created it concurrently
    if entry is None:
        raise PrivilegeError(
            f"could not create system user {name!r} (useradd exit {result.returncode}): "
            f"{result.stderr.strip()}"
        )
    return entry


def ensure_accessible(path: Path, account: PgAccount | None = None) -> list[Path]:
    """Make every ancestor directory of ``path`` traversable by ``account``.

    Only when running as root for another user: a data directory inside e.g.
    ``/root`` (mode 0700) is unreachable for the server user. Such ancestors get
    the execute bit for others (``chmod o+x``, nothing else) and a WARNING naming
    the directory is logged. Both the literal and the symlink-resolved ancestors
    are checked. ACLs are not considered.

    Args:
        path: The directory the account must reach (it need not exist yet).
        account: The server account; looked up with :func:`get_pg_account` if None.

    Returns:
        The directories whose mode was changed.

    Raises:
        PrivilegeError: A directory could not be changed.
    """
    account = account or get_pg_account()
    if not account.switch:
        return []
    changed: list[Path] = []
    for directory in _ancestors(path):
        try:
            info = directory.stat()
        except FileNotFoundError:
            continue
        if _can_traverse(info, account):
            continue
        try:
            directory.chmod(stat.S_IMODE(info.st_mode) | stat.S_IXOTH)
        except OSError as exc:
            raise PrivilegeError(
                f"user {account.name!r} cannot reach {path}: {directory} is not traversable "
                f"and chmod o+x failed: {exc}"
            ) from exc
        logger.warning(
            "made %s traversable by other users (chmod o+x) so that PostgreSQL, running as "
            "user %r, can reach %s",
            directory,
            account.name,
            path,
        )
        changed.append(directory)
    return changed


def _ancestors(path: Path) -> list[Path]:
    """Return the ancestors of ``path`` (literal and resolved), outermost first."""
    literal = Path(os.path.abspath(path))
    resolved = literal.resolve()
    ordered: dict[Path, None] = {}
    for candidate in (literal, resolved):
        for parent in reversed(candidate.parents):
            ordered[parent] = None
    return list(ordered)


def _can_traverse(info: os.stat_result, account: PgAccount) -> bool:
    if not stat.S_ISDIR(info.st_mode):
        return True  # not our business; the OS will report a clear error
    if info.st_uid == account.uid:
        return bool(info.st_mode & stat.S_IXUSR)
    if info.st_gid in account.groups:
        return bool(info.st_mode & stat.S_IXGRP)
    return bool(info.st_mode & stat.S_IXOTH)


def prepare_owned_dir(path: Path, account: PgAccount, *, mode: int = 0o700) -> None:
    """Create ``path`` if needed so that ``account`` owns it and can reach it.

    When switching users, the directory is chowned to the account (recursively if
    it was owned by someone else, e.g. after the server user changed) and its
    ancestors are made traversable with :func:`ensure_accessible`.

    Args:
        path: The directory.
        account: The server account.
        mode: Permission bits for the directory itself.
    """
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(mode)
    if not account.switch:
        return
    info = path.stat()
    if (info.st_uid, info.st_gid) != (account.uid, account.gid):
        if any(path.iterdir()):
            logger.warning("changing the owner of %s to user %r", path, account.name)
        chown_tree(path, account)
    ensure_accessible(path, account)


def chown_tree(root: Path, account: PgAccount) -> None:
    """Give ``root`` and everything below it to ``account`` (symlinks are not followed).

    Args:
        root: The top directory.
        account: The new owner (user and primary group).
    """
    os.chown(root, account.uid, account.gid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in (*dirnames, *filenames):
            os.chown(os.path.join(dirpath, name), account.uid, account.gid, follow_symlinks=False)


def server_env(account: PgAccount) -> dict[str, str]:
    """Return an environment for the server programs.

    ``PG*`` variables of the caller (``PGPORT``, ``PGDATA``, ...) are removed so they
    cannot change which cluster or port is used; ``HOME``/``USER``/``LOGNAME``
    match the account when switching users.

    Args:
        account: The server account.

    Returns:
        A new environment mapping.
    """
    env = {key: value for key, value in os.environ.items() if not key.startswith("PG")}
    if account.switch:
        env.update(HOME=account.home, USER=account.name, LOGNAME=account.name)
    return env


def run_as(
    account: PgAccount,
    argv: Sequence[str | os.PathLike[str]],
    *,
    cwd: Path | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a command as ``account`` and capture its output.

    Args:
        account: Who runs the command.
        argv: The program and its arguments (no shell).
        cwd: Working directory; must be reachable by the account.
        timeout: Seconds before :class:`subprocess.TimeoutExpired` is raised.
        env: Environment; defaults to :func:`server_env`.

    Returns:
        The completed process; the exit status is not checked.
    """
    return subprocess.run(
        argv,
        cwd=cwd,
        env=dict(env) if env is not None else server_env(account),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **account.subprocess_kwargs(),
    )
