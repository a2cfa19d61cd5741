"""The queue rules of app/core/validation.py: a queue's configuration at and beyond its bounds,
and the changes a queue patch may make."""

from __future__ import annotations

import pytest

from app.core import validation as v
from app.core.models import QueueConfig
from tests.core.helpers import EXCLUSIVE, refused


def test_queue_config_defaults_are_valid():
    assert v.queue_config(QueueConfig()) == QueueConfig()
    assert v.queue_config(EXCLUSIVE) == EXCLUSIVE


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (QueueConfig(kind="fifo"), "kind"),  # type: ignore[arg-type]
        (QueueConfig(kind="exclusive"), "exclusive_key"),
        (QueueConfig(kind="exclusive", exclusive_key=""), "exclusive_key"),
        (QueueConfig(kind="exclusive", exclusive_key="k" * 65), "exclusive_key"),
        (QueueConfig(kind="exclusive", exclusive_key="a\x00"), "exclusive_key"),
        (QueueConfig(exclusive_key="project"), "exclusive_key"),
        (QueueConfig(lease_seconds=0), "lease_seconds"),
        (QueueConfig(lease_seconds=v.MAX_LEASE_SECONDS + 1), "lease_seconds"),
        (QueueConfig(delay_seconds=-1), "delay_seconds"),
        (QueueConfig(delay_seconds=v.MAX_DELAY_SECONDS + 1), "delay_seconds"),
        (QueueConfig(max_attempts=0), "max_attempts"),
        (QueueConfig(max_attempts=v.MAX_ATTEMPTS + 1), "max_attempts"),
        (QueueConfig(retry_delay_seconds=-1), "retry_delay_seconds"),
        (QueueConfig(retry_delay_seconds=v.MAX_DELAY_SECONDS + 1), "retry_delay_seconds"),
        (QueueConfig(retry_delay_max_seconds=-1), "retry_delay_max_seconds"),
        (QueueConfig(retention_seconds=-1), "retention_seconds"),
        (QueueConfig(retention_seconds=v.MAX_RETENTION_SECONDS + 1), "retention_seconds"),
    ],
)
def test_queue_config_refusals(config: QueueConfig, field: str):
    with refused(field):
        v.queue_config(config)


def test_queue_config_bounds_inclusive():
    config = QueueConfig(
        lease_seconds=v.MAX_LEASE_SECONDS,
        delay_seconds=v.MAX_DELAY_SECONDS,
        max_attempts=v.MAX_ATTEMPTS,
        retry_delay_seconds=v.MAX_DELAY_SECONDS,
        retry_delay_max_seconds=v.MAX_DELAY_SECONDS,
        retention_seconds=v.MAX_RETENTION_SECONDS,
    )
    assert v.queue_config(config) is config
    low = QueueConfig(
        lease_seconds=1,
        delay_seconds=0,
        max_attempts=1,
        retry_delay_seconds=0,
        retry_delay_max_seconds=0,
        retention_seconds=0,
    )
    assert v.queue_config(low) is low


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"kind": "exclusive"}, "kind"),
        ({"exclusive_key": "x"}, "exclusive_key"),
        ({"colour": "blue"}, "colour"),
        ({"lease_seconds": 0}, "lease_seconds"),
        ({"max_attempts": v.MAX_ATTEMPTS + 1}, "max_attempts"),
        ({"retention_seconds": -1}, "retention_seconds"),
        ({"delay_seconds": 0, "retry_delay_seconds": -1}, "retry_delay_seconds"),
    ],
)
def test_queue_patch_refusals(changes: dict, field: str):
    with refused(field):
        v.queue_patch(changes)


def test_queue_patch_accepts():
    changes = {"lease_seconds": 60, "enqueue_paused": True, "dequeue_paused": False}
    result = v.queue_patch(changes)
    assert result == changes
    assert result is not changes  # a copy
    assert v.queue_patch({}) == {}
