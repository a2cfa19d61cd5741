"""Fixtures of the pipeline tests: one local SparkSession for the whole run (2 cores, no UI,
2 shuffle partitions), a lake directory per test, and a psycopg connection to the test's
database."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pyspark.sql import SparkSession

from app.config import Settings
from app.pipeline.database import connect
from app.pipeline.session import start_spark

SPARK_SETTINGS = Settings(
    spark_master="local[2]",
    spark_shuffle_partitions=2,
    spark_ui_enabled=False,
    spark_driver_memory="1g",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.pipeline)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = start_spark(SPARK_SETTINGS)
    yield session
    session.stop()


@pytest.fixture
def lake(tmp_path: Path) -> str:
    return str(tmp_path / "lake")


@pytest.fixture
def db(database_url: str) -> Iterator[psycopg.Connection[Any]]:
    """An autocommit connection (in UTC) to this test's fresh database."""
    with connect(database_url, autocommit=True) as conn:
        yield conn
