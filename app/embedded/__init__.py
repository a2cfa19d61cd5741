"""Private PostgreSQL clusters for Sundial: find, initialise, start and stop, root-safely.

See :class:`LocalCluster` for the persistent embedded cluster used by ``sundial serve``
when no database URL is configured.
"""

from app.embedded.binaries import PostgresNotFound, find_postgres_bindir, has_server_binaries
from app.embedded.cluster import LocalCluster
from app.embedded.errors import ClusterError
from app.embedded.privileges import (
    PgAccount,
    PrivilegeError,
    chown_tree,
    ensure_accessible,
    get_pg_account,
    is_root,
    prepare_owned_dir,
    run_as,
    server_env,
)

__all__ = [
    "ClusterError",
    "LocalCluster",
    "PgAccount",
    "PostgresNotFound",
    "PrivilegeError",
    "chown_tree",
    "ensure_accessible",
    "find_postgres_bindir",
    "get_pg_account",
    "has_server_binaries",
    "is_root",
    "prepare_owned_dir",
    "run_as",
    "server_env",
]
