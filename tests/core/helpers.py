"""What the tests of app/core/validation.py share: the limits and queue configurations they
validate against, fixed datetimes, and :func:`refused`, which checks a refusal and the field it
names."""

from __future__ import annotations

from datetime import UTC, datetime

from app.core import validation as v
from app.core.errors import ValidationError
from app.core.models import QueueConfig

LIMITS = v.Limits(max_payload_bytes=64)
SIMPLE = QueueConfig()
EXCLUSIVE = QueueConfig(kind="exclusive", exclusive_key="project")
NOW = datetime(2030, 1, 1, tzinfo=UTC)
NAIVE = datetime(2030, 1, 1)  # noqa: DTZ001 - the point of the test


def refused(field: str):
    """Context manager: a ValidationError naming exactly ``field``."""
    return _Refused(field)


class _Refused:
    """What :func:`refused` returns: checks, on leaving, that the block raised as expected."""

    def __init__(self, field: str) -> None:
        self.field = field

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, tb) -> bool:
        assert kind is not None, f"expected a ValidationError for {self.field!r}, nothing raised"
        assert kind is ValidationError, f"expected ValidationError, got {kind.__name__}: {error}"
        assert error.field == self.field
        assert error.details == {"field": self.field}
        assert error.message.startswith(f"{self.field}: ")
        assert error.code == "validation_error"
        return True
