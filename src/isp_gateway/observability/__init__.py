"""Operating endpoints (BEYOND.md): readiness, Prometheus metrics, and their wiring.

Nothing here imports prometheus_client at import time: in multiprocess mode the client picks
its value store when first imported, which must come after `workers.prepare_metrics_dir` has
set PROMETHEUS_MULTIPROC_DIR (see workers.py).
"""

# The scope key an ASGI layer that answers before routing (the lookup fast path) sets to the
# route template it served, so request metrics label it like the routed request.
ROUTE_TEMPLATE = "isp_gateway.route_template"
# The route label of an answer no route served (a 404 for an unknown path).
UNMATCHED = "unmatched"
