"""The packed pending-invoice index: the same answers as a dict per username, in a bounded
number of bytes an invoice (no server needed)."""

from __future__ import annotations

import gc
import json
import random
import tracemalloc
from typing import Any

from isp_gateway.accounts.index import InvoiceIndex, build_invoice_index, pack_invoices
from isp_gateway.upstream.invoices import PendingInvoice


def _pairs(count: int, users: int, seed: int) -> list[tuple[str, PendingInvoice]]:
    rng = random.Random(seed)
    pairs: list[tuple[str, PendingInvoice]] = []
    for _ in range(count):
        due = rng.choice([None, f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"])
        total = rng.choice([None] + [float(rng.randint(0, 90_000)) + 0.25] * 20)
        pairs.append(
            (
                # Usernames as the upstream writes them, accents and quotes included.
                rng.choice([f"user{rng.randrange(users)}@isp", 'zoë "z"', "ángel", "a"]),
                {
                    "invoice_id": rng.randrange(10**9),
                    "total": total,
                    "issued_on": rng.choice([None, "2026-01-05"]),
                    "due_on": due,
                },
            )
        )
    return pairs


def _reference(pairs: list[tuple[str, PendingInvoice]]) -> dict[str, list[PendingInvoice]]:
    """The index as a dict per username, oldest due first, undated last, then by id."""
    by_user: dict[str, list[PendingInvoice]] = {}
    for username, invoice in pairs:
        by_user.setdefault(username, []).append(invoice)
    for bucket in by_user.values():
        bucket.sort(key=lambda i: (i["due_on"] or "9999-99-99", i["invoice_id"]))
    return by_user


def test_the_packed_index_answers_what_a_dict_per_user_answers() -> None:
    pairs = _pairs(3_000, 400, seed=3)
    expected = _reference(pairs)
    # Packed by the loader, and through the store (JSON) as another worker reads it.
    packed = build_invoice_index(pack_invoices(pairs))
    adopted = build_invoice_index(json.loads(json.dumps(pack_invoices(pairs))))
    older = build_invoice_index(json.loads(json.dumps({"invoices": pairs})))  # older release
    for index in (packed, adopted, older):
        assert index.count == len(pairs)
        for username, invoices in expected.items():
            assert username in index
            assert index.invoices(username) == invoices
            assert index.unreadable(username) == any(i["total"] is None for i in invoices)
        for stranger in ("", "user-1@isp", "zzzz", "user1@is", "\uffff"):
            assert stranger not in index
            assert index.invoices(stranger) == []
            assert not index.unreadable(stranger)


def test_an_empty_list() -> None:
    for value in (None, {}, pack_invoices([]), {"invoices": []}):
        index = build_invoice_index(value)
        assert index.count == 0
        assert "a" not in index
        assert index.invoices("a") == []


def test_an_invoice_costs_under_100_traced_bytes() -> None:
    # 100,000 invoices: about 60 bytes a line plus a 4-byte offset; a dict per invoice cost
    # about 700 bytes. Traced bytes, not RSS: deterministic.
    pairs = _pairs(100_000, 60_000, seed=5)
    value: Any = pack_invoices(pairs)
    del pairs
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        index: InvoiceIndex | None = build_invoice_index(value)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert index is not None and index.count == 100_000
    per_invoice = (held + len(value["lines"])) / 100_000
    assert per_invoice < 100, per_invoice
