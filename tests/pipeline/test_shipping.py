"""Sundial's code for a cluster's executors: a zip of the installed ``app`` package that a Python
without Sundial imports, built once per content; and which masters get it."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from app.config import Settings
from app.pipeline import shipping
from app.pipeline.session import PYTHON, is_local, spark_conf


def test_the_zip_holds_the_package_sources_only(tmp_path: Path) -> None:
    shipped = shipping.package_zip(tmp_path)
    names = zipfile.ZipFile(shipped).namelist()
    assert {"app/__init__.py", "app/pipeline/rows.py", "app/core/validation.py"} <= set(names)
    assert all(name.startswith("app/") and name.endswith(".py") for name in names)
    assert not [name for name in names if "__pycache__" in name]
    sources = shipping.package_sources()
    assert len(names) == len(sources)


def test_a_python_without_sundial_imports_the_checks_from_the_zip(tmp_path: Path) -> None:
    """What an executor does: its PYTHONPATH holds the zip (Spark adds it) and the third-party
    packages, and no Sundial is installed (``-S``: the editable install's .pth is not read)."""
    shipped = shipping.package_zip(tmp_path)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    site_packages = sysconfig.get_paths()["purelib"]
    probe = "import app.pipeline.rows as rows; print(rows.__file__)"
    without = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        env={**env, "PYTHONPATH": site_packages},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert "No module named 'app'" in without.stderr
    with_zip = subprocess.run(
        [sys.executable, "-S", "-c", probe],
        env={**env, "PYTHONPATH": f"{shipped}:{site_packages}"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert with_zip.stdout.strip() == f"{shipped}/app/pipeline/rows.py"


def test_the_zip_is_built_once_per_content(tmp_path: Path, monkeypatch) -> None:
    package = tmp_path / "src" / "app"
    (package / "core").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "core" / "rules.py").write_text("LIMIT = 1\n")
    (package / "core" / "__pycache__").mkdir()
    (package / "core" / "__pycache__" / "rules.cpython-311.pyc").write_bytes(b"\0")
    monkeypatch.setattr(shipping, "package_root", lambda: package)
    cache = tmp_path / "cache"

    first = shipping.package_zip(cache)
    built = first.stat().st_mtime_ns
    assert shipping.package_zip(cache) == first  # the same sources: reused, not rebuilt
    assert first.stat().st_mtime_ns == built
    assert first.name.startswith(f"sundial-{shipping._version()}-")
    assert sorted(zipfile.ZipFile(first).namelist()) == ["app/__init__.py", "app/core/rules.py"]

    (package / "core" / "rules.py").write_text("LIMIT = 2\n")  # an edited checkout
    second = shipping.package_zip(cache)
    assert second != first
    assert zipfile.ZipFile(second).read("app/core/rules.py") == b"LIMIT = 2\n"
    assert sorted(p.name for p in cache.iterdir()) == sorted([first.name, second.name])


def test_an_unwritable_cache_falls_back_to_the_temp_dir(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    shipped = shipping.package_zip(not_a_directory / "cache")
    assert shipped.parent == tmp_path / "tmp" / f"sundial-pipeline-{os.getuid()}"


@pytest.mark.parametrize(
    ("master", "local"),
    [
        ("local", True),
        ("local[*]", True),
        ("local[2]", True),
        ("local-cluster[2,1,1024]", True),
        ("spark://127.0.0.1:7077", False),
        ("yarn", False),
        ("k8s://https://kubernetes:443", False),
    ],
)
def test_code_is_shipped_to_every_master_but_a_local_one(master: str, local: bool) -> None:
    assert is_local(master) is local


def test_the_executors_python_is_configurable(monkeypatch) -> None:
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    assert spark_conf(Settings())[PYTHON] == sys.executable
    monkeypatch.setenv("PYSPARK_PYTHON", "/opt/python3.11")
    assert spark_conf(Settings())[PYTHON] == "/opt/python3.11"
    given = Settings(spark_conf={PYTHON: "./venv/bin/python"})
    assert spark_conf(given)[PYTHON] == "./venv/bin/python"
