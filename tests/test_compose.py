"""docker-compose.yml cannot run on our machines (no Docker engine), so check that it agrees
with the server: every SUNDIAL_* variable is a real setting, ports match, and the URL points
at the compose database with the psycopg driver."""

from __future__ import annotations

from pathlib import Path

import yaml
from sqlalchemy.engine import make_url

from app.config import Settings

ROOT = Path(__file__).resolve().parents[1]


def load() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_services_and_settings_agree() -> None:
    compose = load()
    assert set(compose["services"]) == {"postgres", "sundial"}
    env = compose["services"]["sundial"]["environment"]
    known = {f"SUNDIAL_{name.upper()}" for name in Settings.model_fields}
    assert set(env) <= known, set(env) - known
    settings = Settings(
        database_url=env["SUNDIAL_DATABASE_URL"],
        host=env["SUNDIAL_HOST"],
        port=int(env["SUNDIAL_PORT"]),
        workers=int(env["SUNDIAL_WORKERS"]),
    )
    assert settings.host == "0.0.0.0"


def test_port_mapping_matches_server_port() -> None:
    sundial = load()["services"]["sundial"]
    port = sundial["environment"]["SUNDIAL_PORT"]
    assert f"{port}:{port}" in sundial["ports"]
    assert f":{port}/readyz" in " ".join(sundial["healthcheck"]["test"])


def test_database_url_reaches_the_compose_postgres() -> None:
    compose = load()
    pg_env = compose["services"]["postgres"]["environment"]
    url = make_url(compose["services"]["sundial"]["environment"]["SUNDIAL_DATABASE_URL"])
    assert url.drivername == "postgresql+psycopg"
    assert (url.host, url.port) == ("postgres", 5432)
    assert (url.username, url.password, url.database) == (
        pg_env["POSTGRES_USER"],
        pg_env["POSTGRES_PASSWORD"],
        pg_env["POSTGRES_DB"],
    )
    assert compose["services"]["sundial"]["depends_on"]["postgres"]["condition"] == (
        "service_healthy"
    )


def test_dockerfile_copies_what_the_server_needs() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for path in ("app", "alembic", "migrations", "pyproject.toml"):
        assert f"COPY {path}" in dockerfile or f" {path} " in dockerfile, path
