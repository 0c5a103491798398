"""Operating endpoints (BEYOND.md): readiness, Prometheus metrics, and their wiring.

Nothing here imports prometheus_client at import time: in multiprocess mode the client picks
its value store when first imported, which must come after `workers.prepare_metrics_dir` has
set PROMETHEUS_MULTIPROC_DIR (see workers.py).
"""
