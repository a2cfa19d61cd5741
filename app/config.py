"""Server configuration, read from ``SUNDIAL_*`` environment variables (and a ``.env`` file).

No other module reads the environment: everything else receives a :class:`Settings`.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from limits import parse
from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Everything an operator can configure. Each field is ``SUNDIAL_<NAME>`` in the environment."""

    model_config = SettingsConfigDict(
        env_prefix="SUNDIAL_", env_file=".env", extra="ignore", use_attribute_docstrings=True
    )

    database_url: str | None = None
    """SQLAlchemy URL of the database (``postgresql+psycopg://user:pass@host:5432/db``).
    Unset: the embedded default, a private PostgreSQL cluster in ``data_dir``."""

    data_dir: Path = Path(".sundial")
    """Where the embedded default keeps its PostgreSQL cluster and generated admin token."""

    pg_bindir: Path | None = None
    """Directory of the PostgreSQL server binaries for the embedded default (found if unset)."""

    host: str = "127.0.0.1"
    """Address the HTTP server binds."""

    port: int = Field(default=8080, ge=1, le=65535)
    """Port the HTTP server binds."""

    workers: int = Field(default_factory=lambda: os.cpu_count() or 1, ge=1, le=64)
    """Number of server worker processes (uvicorn workers)."""

    admin_token: SecretStr | None = None
    """The admin token. Unset with the embedded default: generated once and kept in data_dir."""

    max_payload_bytes: int = Field(default=256 * 1024, ge=1024)
    """Largest payload of one message, in bytes of JSON."""

    max_body_bytes: int = Field(default=1024 * 1024, ge=4096)
    """Largest HTTP request body, in bytes."""

    rate_limit: str | None = None
    """Requests each token (and the admin) may make per worker process, e.g. ``500/second`` or
    ``20000/minute``; over it the answer is 429 ``rate_limited``. Unset: no limit."""

    pool_size: int = Field(default=10, ge=1, le=200)
    """Database connections per worker process."""

    scheduler_enabled: bool = True
    """Run the background scheduler in this process (one process is active at a time)."""

    scheduler_tick_seconds: float = Field(default=0.1, gt=0, le=10)
    """How often the active scheduler promotes due messages and releases expired leases."""

    scheduler_cleanup_seconds: float = Field(default=10.0, gt=0)
    """How often the active scheduler moves finished messages past retention into history."""

    leader_poll_seconds: float = Field(default=1.0, gt=0, le=10)
    """How often a standby process tries to become the active scheduler."""

    leader_stale_seconds: float = Field(default=3.0, ge=0.5, le=300)
    """A leader whose database session has been idle this long is frozen or cut off: a standby
    terminates that session (fencing it) and takes over. Must exceed scheduler_tick_seconds."""

    history_partition_days_ahead: int = Field(default=3, ge=1, le=60)
    """How many daily history partitions the scheduler keeps created ahead of time."""

    lookup_cache_seconds: float = Field(default=1.0, ge=0, le=60)
    """How long a worker reuses a token or queue it has read (0: never). Its own changes apply
    at once; a token revoked or a queue changed through another process applies within this."""

    startup_timeout_seconds: float = Field(default=60.0, ge=0, le=3600)
    """How long `sundial serve` waits at start for the database to accept connections."""

    log_level: str = "INFO"
    """Logging level of the server."""

    pipeline_lake: str | None = None
    """Default Parquet lake of `sundial pipeline` (a directory, or an `s3a://` URI on a cluster)."""

    pipeline_history_retention_days: int = Field(default=30, ge=1, le=3650)
    """`sundial pipeline prune-history` drops history partitions of days older than this, and
    only once every row in them has been exported to the lake."""

    pipeline_export_lag_seconds: float = Field(default=5.0, ge=0, le=3600)
    """An export takes history archived at least this long ago (and before the oldest open
    transaction), so no row can still appear behind its watermark."""

    pipeline_enqueue_batch_rows: int = Field(default=20000, ge=100, le=1_000_000)
    """Rows per transaction of `sundial pipeline enqueue`."""

    pipeline_report_top_exclusive: int = Field(default=3, ge=1, le=100)
    """How many of the busiest exclusive values each hourly report row names."""

    spark_master: str = "local[*]"
    """Spark master of the pipeline jobs (`local[*]`: in this process, every core)."""

    spark_driver_memory: str = "2g"
    """Heap of the Spark driver JVM when the pipeline starts it (`spark.driver.memory`)."""

    spark_shuffle_partitions: int = Field(default=4, ge=1, le=100_000)
    """`spark.sql.shuffle.partitions`: small for one machine, raise it on a cluster."""

    spark_ui_enabled: bool = False
    """Serve the Spark web UI while a pipeline job runs (on 127.0.0.1 for a local master)."""

    spark_local_dir: Path | None = None
    """Scratch directory of Spark (shuffle and spill files); unset: the system's temp dir."""

    spark_conf: dict[str, str] = Field(default_factory=dict)
    """Any other Spark settings, as JSON: `{"spark.executor.memory": "8g"}`."""

    @field_validator("rate_limit")
    @classmethod
    def _rate_limit_parses(cls, value: str | None) -> str | None:
        if value is not None:
            parse(value)  # raises ValueError with the reason
        return value

    @model_validator(mode="after")
    def _leader_outlives_a_tick(self) -> Settings:
        if self.leader_stale_seconds <= 2 * self.scheduler_tick_seconds:
            raise ValueError(
                "leader_stale_seconds must exceed twice scheduler_tick_seconds, or a working"
                " leader would be taken for a stalled one"
            )
        return self


def reference_table() -> str:
    """The configuration reference as a Markdown table (docs/operations.md embeds it)."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        if field.default_factory is not None:
            default = "number of cores" if name == "workers" else "computed"
        elif field.default is None:
            default = "—"
        else:
            default = f"`{field.default}`"
        meaning = " ".join((field.description or "").split())
        lines.append(f"| `SUNDIAL_{name.upper()}` | {default} | {meaning} |")
    return "\n".join(lines) + "\n"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()
