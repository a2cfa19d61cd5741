"""Server configuration, read from ``SUNDIAL_*`` environment variables (and a ``.env`` file).

No other module reads the environment: everything else receives a :class:`Settings`.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

from limits import parse
from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.exc import ArgumentError

from app.core.models import DEFAULT_POOL
from app.database_url import several_hosts_problem

POOL_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
"""What a pool may be called (it appears in metrics labels, URLs and logs)."""

MIN_ADMIN_TOKEN_LENGTH = 32
"""The shortest admin token the server accepts: anyone who can reach the server may guess it,
so it must be long and random (a generated one is ``sdl_admin_`` and 43 random characters)."""


class Settings(BaseSettings):
    """Everything an operator can configure. Each field is ``SUNDIAL_<NAME>`` in the environment."""

    model_config = SettingsConfigDict(
        env_prefix="SUNDIAL_", env_file=".env", extra="ignore", use_attribute_docstrings=True
    )

    database_url: str | None = None
    """SQLAlchemy URL of the database (``postgresql+psycopg://user:pass@host:5432/db``).
    Unset: the embedded default, a private PostgreSQL cluster in ``data_dir``."""

    pools: dict[str, str] = Field(default_factory=dict)
    """More databases to hold namespaces, as JSON: `{"eu": "postgresql+psycopg://…", …}`. Each
    name is a pool; the database of `SUNDIAL_DATABASE_URL` (or the embedded default) is the
    catalogue and also the pool `default`. Empty: one database (docs/scaling.md)."""

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

    sqs_sealing_key: SecretStr | None = None
    """What the SQS door's access keys' secrets are sealed under (docs/sqs.md). Unset: the admin
    token, so changing the admin token then makes every SQS access key unusable."""

    metrics_token: SecretStr | None = None
    """Bearer token that `GET /metrics` asks for (`Authorization: Bearer <token>`; else 401).
    Unset: /metrics needs no token."""

    max_payload_bytes: int = Field(default=256 * 1024, ge=1024)
    """Largest payload of one message, in bytes of JSON."""

    max_body_bytes: int = Field(default=1024 * 1024, ge=4096)
    """Largest HTTP request body, in bytes."""

    express_lane: bool = True
    """Answer the hot calls (enqueue, dequeue, ack, complete, fail, extend) on the server's
    short path past the web framework's per-request layers (the same checks and answers); off,
    every request takes the framework's routes."""

    rate_limit: str | None = None
    """Requests each token (and the admin) may make per worker process, e.g. ``500/second`` or
    ``20000/minute``; over it the answer is 429 ``rate_limited``. Unset: no limit."""

    auth_failure_limit: int = Field(default=20, ge=0, le=100_000)
    """Failed authentications with a guessable secret (a wrong admin or metrics token, any bearer
    secret not shaped like a namespace token, a refused dashboard sign-in) one client address may
    make per auth_failure_window_seconds, per worker process; past it, every such secret from
    that address gets 429 ``rate_limited`` with ``Retry-After``, unchecked, until the oldest
    failure leaves the window. Namespace tokens (256 random bits) are never throttled.
    0: no throttle."""

    auth_failure_window_seconds: int = Field(default=60, ge=1, le=86_400)
    """The moving window of auth_failure_limit, in seconds."""

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

    history_retention_days: int | None = Field(default=None, ge=1, le=36500)
    """The scheduler's leader drops the daily history partitions of days older than this, by SQL
    alone (no pipeline needed), at its cleanup cadence; `sundial history prune` does the same at
    once. Once the pipeline has exported history from a database, only partitions whose every
    row is exported go. Unset: history is kept forever (or until the pipeline prunes it)."""

    lookup_cache_seconds: float = Field(default=60.0, ge=0, le=3600)
    """How long a worker keeps a token or queue it has read (0: never). Not a staleness bound:
    every change applies to the next request in every process whatever this is (each statement
    checks the catalogue version its lookups were read at); this only returns the memory of
    entries nobody uses."""

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

    @field_validator("database_url")
    @classmethod
    def _database_url_reaches_the_primary(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                problem = several_hosts_problem(value)
            except ArgumentError as error:
                raise ValueError(f"not a database URL: {error}") from None
            if problem is not None:
                raise ValueError(problem)
        return value

    @field_validator("pools")
    @classmethod
    def _pools_are_named_databases(cls, value: dict[str, str]) -> dict[str, str]:
        for name, url in value.items():
            if not POOL_NAME.fullmatch(name):
                raise ValueError(
                    f"pool name {name!r}: 1-63 lowercase letters, digits, '_' or '-',"
                    " starting with a letter or digit"
                )
            if name == DEFAULT_POOL:
                raise ValueError(
                    f"pool {DEFAULT_POOL!r} is the catalogue's database (SUNDIAL_DATABASE_URL);"
                    " name the other pools otherwise"
                )
            try:
                problem = several_hosts_problem(url)
            except ArgumentError as error:
                raise ValueError(f"pool {name!r}: not a database URL: {error}") from None
            if problem is not None:
                raise ValueError(f"pool {name!r}: {problem}")
        return value

    @field_validator("admin_token")
    @classmethod
    def _admin_token_is_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            check_admin_token(value.get_secret_value())
        return value

    @model_validator(mode="after")
    def _leader_outlives_a_tick(self) -> Settings:
        if self.leader_stale_seconds <= 2 * self.scheduler_tick_seconds:
            raise ValueError(
                "leader_stale_seconds must exceed twice scheduler_tick_seconds, or a working"
                " leader would be taken for a stalled one"
            )
        return self


def check_admin_token(token: str) -> None:
    """Refuse an admin token too short to be safe (generated ones are far longer).

    Raises:
        ValueError: shorter than :data:`MIN_ADMIN_TOKEN_LENGTH`, saying how to make a good one.
    """
    if len(token) < MIN_ADMIN_TOKEN_LENGTH:
        raise ValueError(
            f"the admin token is {len(token)} characters long; it must have at least"
            f" {MIN_ADMIN_TOKEN_LENGTH}, or anyone who can reach the server may guess it. Make"
            " one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )


def describe_invalid(error: ValidationError) -> str:
    """What is wrong with the configuration, a line per setting (``SUNDIAL_<NAME>: why``),
    never echoing a value (it may be a secret)."""
    lines = ["invalid configuration:"]
    for item in error.errors(include_url=False, include_input=False, include_context=False):
        where = f"SUNDIAL_{str(item['loc'][0]).upper()}" if item["loc"] else "settings"
        lines.append(f"  {where}: {item['msg'].removeprefix('Value error, ')}")
    return "\n".join(lines)


def reference_table() -> str:
    """The configuration reference as a Markdown table (docs/operations.md embeds it)."""
    lines = ["| variable | default | meaning |", "|---|---|---|"]
    for name, field in Settings.model_fields.items():
        if name == "workers":
            default = "number of cores"
        elif field.default_factory is dict:
            default = "—"
        elif field.default_factory is not None:
            default = "computed"
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
