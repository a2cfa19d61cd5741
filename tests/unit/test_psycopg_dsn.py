"""``psycopg_dsn``: the libpq connection string for the server's SQLAlchemy URL, which the
LISTEN connection, reporting and the pipeline connect with."""

from __future__ import annotations

from psycopg.conninfo import conninfo_to_dict

from app.store.notifications import psycopg_dsn


def test_a_tcp_url_keeps_every_part() -> None:
    dsn = psycopg_dsn("postgresql+psycopg://ann:s%40cret@db.example:6543/queue?sslmode=require")
    assert conninfo_to_dict(dsn) == {
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
        "host": "/home/a b/c+1/run",
        "port": "5433",
        "user": "sundial",
        "dbname": "sundial",
    }
