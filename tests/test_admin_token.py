"""An admin token shorter than MIN_ADMIN_TOKEN_LENGTH is refused: by the settings, and by
``sundial serve`` at start with a clear message (no traceback, and the token itself never
printed), whether it comes from SUNDIAL_ADMIN_TOKEN or from the data dir's admin-token file."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from pydantic import SecretStr, ValidationError

from app.bootstrap.database import ensure_admin_token
from app.config import MIN_ADMIN_TOKEN_LENGTH, Settings, describe_invalid
from tests.processes import SUNDIAL, clean_env, free_port

SHORT = "s3cret-but-short-token"  # 22 characters
UNREACHABLE = "postgresql+psycopg://nobody@127.0.0.1:1/nothing"


def settings(**values: object) -> Settings:
    return Settings(_env_file=None, **values)  # type: ignore[arg-type, call-arg]


def test_a_short_admin_token_is_refused_with_the_reason() -> None:
    with pytest.raises(ValidationError) as refused:
        settings(admin_token=SecretStr("x" * (MIN_ADMIN_TOKEN_LENGTH - 1)))
    message = describe_invalid(refused.value)
    assert "SUNDIAL_ADMIN_TOKEN" in message
    assert f"{MIN_ADMIN_TOKEN_LENGTH - 1} characters long" in message
    assert f"at least {MIN_ADMIN_TOKEN_LENGTH}" in message
    assert "x" * 8 not in message  # the value is never echoed


def test_a_long_enough_admin_token_is_accepted() -> None:
    token = "x" * MIN_ADMIN_TOKEN_LENGTH
    admin_token = settings(admin_token=token).admin_token
    assert admin_token is not None
    assert admin_token.get_secret_value() == token


def test_a_generated_admin_token_is_long_enough(tmp_path: Path) -> None:
    token, generated = ensure_admin_token(settings(data_dir=tmp_path))
    assert generated
    assert settings(admin_token=token).admin_token is not None


def test_the_description_of_an_invalid_configuration_never_shows_a_value() -> None:
    with pytest.raises(ValidationError) as refused:
        settings(admin_token=SHORT, port=0)
    message = describe_invalid(refused.value)
    assert "SUNDIAL_PORT" in message
    assert "SUNDIAL_ADMIN_TOKEN" in message
    assert SHORT not in message


def serve(env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SUNDIAL), "serve", "--no-migrate"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_serve_refuses_a_short_admin_token_before_anything_else(tmp_path: Path) -> None:
    # The database is unreachable: had serve got as far as connecting, it would wait for it.
    env = clean_env(
        SUNDIAL_ADMIN_TOKEN=SHORT,
        SUNDIAL_DATABASE_URL=UNREACHABLE,
        SUNDIAL_PORT=str(free_port()),
        SUNDIAL_DATA_DIR=str(tmp_path / "data"),
    )
    result = serve(env, tmp_path)
    assert result.returncode == 1, result
    assert "SUNDIAL_ADMIN_TOKEN" in result.stderr
    assert f"at least {MIN_ADMIN_TOKEN_LENGTH}" in result.stderr
    assert "Traceback" not in result.stderr
    assert SHORT not in result.stderr + result.stdout
    assert not (tmp_path / "data").exists()


def test_serve_refuses_a_short_admin_token_from_the_data_dir(
    database_url: str, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "admin-token").write_text(SHORT + "\n")
    env = clean_env(
        SUNDIAL_DATABASE_URL=database_url,
        SUNDIAL_PORT=str(free_port()),
        SUNDIAL_DATA_DIR=str(data),
    )
    result = serve(env, tmp_path)
    assert result.returncode == 1, result
    assert f"at least {MIN_ADMIN_TOKEN_LENGTH}" in result.stderr
    assert "Traceback" not in result.stderr
    assert SHORT not in result.stderr + result.stdout
    assert "listening" not in result.stdout
