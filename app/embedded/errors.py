"""The errors of the private PostgreSQL servers: the embedded default's cluster and the
development formation."""

from __future__ import annotations


class ClusterError(RuntimeError):
    """Raised when the embedded cluster cannot be initialised, started or stopped."""


class FormationError(RuntimeError):
    """Raised when the formation cannot be created, started, changed or stopped."""
