"""``sundial dev-cluster``, the command a developer drives the local formation with."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from app.bootstrap.commands import main
from app.embedded.formation import Formation

pytestmark = [pytest.mark.slow, pytest.mark.ha, pytest.mark.serial]


def run(formation_dir: Path, *args: str) -> str:
    result = CliRunner().invoke(main, ["dev-cluster", "--dir", str(formation_dir), *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_status_url_and_switchover(formation: Formation) -> None:
    before = formation.primary()
    assert before is not None
    status = run(formation.base_dir, "status")
    assert f"{before.name}  port {before.port}" in status
    assert "primary" in status
    assert "secondary" in status
    assert run(formation.base_dir, "url").strip() == formation.sqlalchemy_url

    assert "switched over" in run(formation.base_dir, "switchover")
    after = formation.primary()
    assert after is not None
    assert after.name != before.name


def test_a_directory_without_a_formation_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["dev-cluster", "--dir", str(tmp_path), "url"])
    assert result.exit_code == 1
    assert "no formation in" in result.output
    assert "run `up` first" in result.output
