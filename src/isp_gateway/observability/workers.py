"""Metrics under `serve --workers N`: one directory every worker process writes its counts to.

prometheus-client's multiprocess mode (https://prometheus.github.io/client_python/multiprocess/):
each process keeps its samples in files under PROMETHEUS_MULTIPROC_DIR and a scrape adds up
all of them, so whichever worker answers reports every worker. The variable must be set before
the workers import prometheus_client, and the directory must start empty, hence this step in
the parent before any worker starts. This module imports nothing of prometheus_client.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from isp_gateway.settings import Settings

ENV = "PROMETHEUS_MULTIPROC_DIR"


def prepare_metrics_dir(settings: Settings, workers: int) -> str | None:
    """Call once in the parent before worker processes start. Uses PROMETHEUS_MULTIPROC_DIR
    when set (emptied of old samples), else, for several workers, a fresh temporary directory
    removed at exit. One worker without the variable keeps the plain in-process registry.
    Returns the directory in use, or None."""
    if not settings.METRICS_ENABLED:
        return None
    path = os.environ.get(ENV)
    if path:
        directory = Path(path)
        directory.mkdir(parents=True, exist_ok=True)
        # Samples of an earlier run would be added to this run's counts.
        for stale in directory.glob("*.db"):
            stale.unlink(missing_ok=True)
        return path
    if workers <= 1:
        return None
    path = tempfile.mkdtemp(prefix="isp-gateway-metrics-")
    atexit.register(shutil.rmtree, path, True)
    # Set in this process's environment, which the workers inherit when they start.
    os.environ[ENV] = path
    return path


def multiprocess_dir() -> str | None:
    return os.environ.get(ENV) or None
