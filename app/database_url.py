"""How every connection of a Sundial process reaches PostgreSQL.

The server is configured with one SQLAlchemy URL (``postgresql+psycopg://…``). Its engine, its
LISTEN connection, reporting and the pipeline all connect with the parameters that URL means to
SQLAlchemy's psycopg dialect (:func:`connect_params`), so a URL that works for one works for all:
a unix socket directory in the query, or several hosts for a replicated database
(``?host=a:5432&host=b:5432&target_session_attrs=read-write``, which libpq needs as
``host=a,b port=5432,5432``).

Each connection also gets :data:`CONNECTION_DEFAULTS` unless the URL sets them: the database
machine can vanish without a word (no TCP reset), and libpq would otherwise wait minutes to
notice, on a connection attempt or on a connection already open.
"""

from __future__ import annotations

from typing import Any

from psycopg.conninfo import make_conninfo
from sqlalchemy.dialects.postgresql.psycopg import PGDialect_psycopg
from sqlalchemy.engine import URL, make_url

CONNECTION_DEFAULTS: dict[str, int] = {
    "connect_timeout": 5,  # s per host tried: a dead first host must not stall every connect
    "keepalives": 1,
    "keepalives_idle": 5,  # s of silence before the first probe
    "keepalives_interval": 2,
    "keepalives_count": 3,  # an idle connection to a vanished machine fails within ~11 s
    "tcp_user_timeout": 10_000,  # ms a sent byte may stay unacknowledged
}
"""libpq parameters every connection gets unless the URL sets them (ignored on unix sockets)."""

PRIMARY_ONLY = frozenset({"read-write", "primary"})
"""``target_session_attrs`` values that make libpq connect only to the node accepting writes."""

_DIALECT = PGDialect_psycopg()  # type: ignore[no-untyped-call]


def connect_params(url: str | URL) -> dict[str, Any]:
    """The libpq parameters of ``url``, as its SQLAlchemy engine connects with them, with
    :data:`CONNECTION_DEFAULTS` for those it does not set."""
    _, params = _DIALECT.create_connect_args(make_url(url))  # type: ignore[no-untyped-call]
    return {**connection_defaults(url), **params}


def connection_defaults(url: str | URL) -> dict[str, int]:
    """The entries of :data:`CONNECTION_DEFAULTS` that ``url`` does not set itself."""
    given = make_url(url).query
    return {key: value for key, value in CONNECTION_DEFAULTS.items() if key not in given}


def psycopg_dsn(url: str | URL) -> str:
    """A libpq connection string for a SQLAlchemy URL (see :func:`connect_params`).

    Written as ``key=value`` pairs, not rendered back into a URL: a rendered query encodes a
    space as ``+``, which libpq reads literally, so a socket directory with a space in its path
    would be lost.
    """
    return make_conninfo("", **connect_params(url))


def several_hosts_problem(url: str | URL) -> str | None:
    """What is wrong with a URL that lists several hosts, if anything: without
    ``target_session_attrs=read-write`` libpq may connect to a standby, where every write fails."""
    parsed = make_url(url)
    hosts = parsed.query.get("host", ())
    several = not isinstance(hosts, str) and len(hosts) > 1
    if several and parsed.query.get("target_session_attrs") not in PRIMARY_ONLY:
        return (
            "a database URL with several hosts must end with target_session_attrs=read-write, "
            "so that Sundial connects only to the primary"
        )
    return None
