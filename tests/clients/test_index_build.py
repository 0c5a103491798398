"""The index build decodes only the leading fields of a packed client; a list packed with
its fields in another order (another release's cache) must index the same."""

from __future__ import annotations

from typing import Any, cast

from isp_gateway.clients.index import ClientIndex, pack_lines, pack_records
from isp_gateway.simulator import build_dataset
from isp_gateway.upstream.clients import ClientRecord, map_clients
from tests.clients.conftest import by_doc, by_phone_number


def _index(records: list[ClientRecord]) -> ClientIndex:
    return ClientIndex(pack_records([pack_lines(records)]), "57", 10, ["Activo"])


def test_fields_in_another_order_index_the_same() -> None:
    records = map_clients(build_dataset(600, 11).clients)
    shuffled = [
        cast(ClientRecord, {**r, "client": dict(reversed(list(r["client"].items())))})
        for r in records
    ]
    usual, other = _index(records), _index(shuffled)
    for record in records[::7]:
        client: Any = record["client"]
        for index in (usual, other):
            assert index.get(client["service_id"]) == client
            if client["document"]:
                found = by_doc(index, client["document"])
                assert found is not None and found["document"] == client["document"]
            for phone in index.phones_of(client):
                assert by_phone_number(index, phone) is not None
        name = (client["name"] or "").split()[0]
        assert [c["service_id"] for c in usual.search(name, 50)] == [
            c["service_id"] for c in other.search(name, 50)
        ]
        assert usual.search(name, 50)
