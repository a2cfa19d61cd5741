"""``app.database_url``: the libpq parameters of the server's SQLAlchemy URL, which the engine, the
LISTEN connection, reporting and the pipeline all connect with."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict
from pydantic import ValidationError

from app.config import Settings
from app.database_url import CONNECTION_DEFAULTS, connection_defaults, psycopg_dsn

DEFAULTS = {key: str(value) for key, value in CONNECTION_DEFAULTS.items()}
FORMATION = (
    "postgresql+psycopg://postgres@/sundial?host=127.0.0.1:55441&host=127.0.0.1:55442"
    "&target_session_attrs=read-write"
)


def test_a_tcp_url_keeps_every_part() -> None:
    dsn = psycopg_dsn("postgresql+psycopg://ann:s%40cret@db.example:6543/queue?sslmode=require")
    assert conninfo_to_dict(dsn) == {
        **DEFAULTS,
        "host": "db.example",
        "port": "6543",
        "user": "ann",
        "password": "s@cret",
        "dbname": "queue",
        "sslmode": "require",
    }


def test_a_unix_socket_directory_survives_spaces_and_plus_signs() -> None:
    # As the embedded default's local URL carries it (LocalCluster.local_sqlalchemy_url).
    url = "postgresql+psycopg://sundial@/sundial?host=%2Fhome%2Fa+b%2Fc%2B1%2Frun&port=5433"
    assert conninfo_to_dict(psycopg_dsn(url)) == {
        **DEFAULTS,
        "host": "/home/a b/c+1/run",
        "port": "5433",
        "user": "sundial",
        "dbname": "sundial",
    }


def test_several_hosts_become_libpq_lists() -> None:
    # pg_auto_failover's formation URL, as an operator gives it to the server: the LISTEN
    # connection used to get it mangled into one host named "127.0.0.1:55442".
    params = conninfo_to_dict(psycopg_dsn(FORMATION))
    assert params["host"] == "127.0.0.1,127.0.0.1"
    assert params["port"] == "55441,55442"
    assert params["target_session_attrs"] == "read-write"
    assert params["dbname"] == "sundial"


def test_the_url_overrides_a_default() -> None:
    url = "postgresql+psycopg://u@h/db?connect_timeout=30&keepalives_idle=60"
    assert "connect_timeout" not in connection_defaults(url)
    params = conninfo_to_dict(psycopg_dsn(url))
    assert params["connect_timeout"] == "30"
    assert params["keepalives_idle"] == "60"
    assert params["keepalives_count"] == DEFAULTS["keepalives_count"]


def test_several_hosts_without_a_primary_only_target_are_refused() -> None:
    url = "postgresql+psycopg://postgres@/sundial?host=a:5432&host=b:5432"
    with pytest.raises(ValidationError, match="target_session_attrs=read-write"):
        Settings(database_url=url)
    with pytest.raises(ValidationError, match="target_session_attrs=read-write"):
        Settings(database_url=url + "&target_session_attrs=any")
    assert Settings(database_url=FORMATION).database_url == FORMATION
    assert Settings(database_url=url + "&target_session_attrs=primary").database_url


def test_a_database_url_that_does_not_parse_is_refused_by_name() -> None:
    with pytest.raises(ValidationError, match="database_url"):
        Settings(database_url="not a url")
