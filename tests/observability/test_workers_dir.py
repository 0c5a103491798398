"""`serve`'s preparation of the metrics directory, and no prometheus_client at import time."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from isp_gateway.observability.workers import ENV, prepare_metrics_dir
from isp_gateway.settings import Settings
from tests.conftest import gateway_settings


@pytest.fixture
def settings(password_hash: str) -> Settings:
    return gateway_settings("http://127.0.0.1:9", password_hash)


def test_one_worker_without_the_variable_keeps_the_plain_registry(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert prepare_metrics_dir(settings, 1) is None
    assert ENV not in os.environ


def test_several_workers_get_a_fresh_directory(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Set (to anything) through monkeypatch first, so that its undo removes the variable
    # prepare_metrics_dir sets: left behind, it turned every later app of this process (the
    # in-process gateways of other tests) to multiprocess mode in a removed directory.
    monkeypatch.setenv(ENV, "")
    monkeypatch.delenv(ENV)
    path = prepare_metrics_dir(settings, 2)
    assert path is not None and os.environ[ENV] == path
    assert Path(path).is_dir() and not any(Path(path).iterdir())


def test_a_given_directory_is_emptied_of_old_samples(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "counter_12.db").write_bytes(b"old")
    (tmp_path / "keep.txt").write_text("not ours")
    monkeypatch.setenv(ENV, str(tmp_path))
    assert prepare_metrics_dir(settings, 1) == str(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_metrics_off_prepares_nothing(password_hash: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    off = gateway_settings("http://127.0.0.1:9", password_hash, METRICS_ENABLED=False)
    assert prepare_metrics_dir(off, 4) is None
    assert ENV not in os.environ


def test_importing_the_app_and_cli_leaves_prometheus_client_unimported() -> None:
    # Its value store is chosen at its first import, which must follow prepare_metrics_dir.
    code = "import sys, isp_gateway.app, isp_gateway.cli; print('prometheus_client' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
