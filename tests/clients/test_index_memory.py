"""The client index's memory bound (issue 13): at most 1.5 KB a client for the cached value
and the index together. Traced bytes (tracemalloc), not RSS: deterministic for a dataset."""

from __future__ import annotations

import gc
import tracemalloc

from isp_gateway.clients.index import ClientIndex, pack_lines, pack_records
from isp_gateway.simulator import build_dataset
from isp_gateway.upstream.clients import map_clients

BOUND = 1536  # bytes a client


def test_value_and_index_hold_under_one_and_a_half_kilobytes_a_client() -> None:
    clients = 20_000
    records = map_clients(build_dataset(clients, 7).clients)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        # As the loader makes it: each page packed as it arrives, then joined.
        value = pack_records([pack_lines(records[i : i + 500]) for i in range(0, clients, 500)])
        index = ClientIndex(value, "57", 10, ["Activo"])
        del value
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(index) == clients
    assert index.get(records[-1]["client"]["service_id"]) == records[-1]["client"]
    per_client = held / clients
    assert per_client <= BOUND, f"{per_client:.0f} B a client"
