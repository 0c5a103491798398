"""The packed form of the cached client list, and the posting maps the index is made of.

The cached value is one string of JSON lines, two per record (the client, then the rest of
the record, whatever keys it has), ASCII-escaped so the string costs one byte a character. A
posting map takes a key to a position (an int), or to an `array('I')` of positions when
several records share the key: most keys belong to one client, and a bare int costs far
less than a list.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from isp_gateway.upstream.clients import ClientRecord

PACKED_FORMAT = "lines/1"

Postings = dict[str, "int | array[int]"]


def document_key(document: str) -> str:
    # Documents may hold letters; a lookup should not depend on their case.
    return document.strip().upper()


# One encoder for every packed line (json.dumps with options builds a new one per call,
# a third of the cost of packing a page). ASCII: the packed string stays one byte per
# character whatever the names hold.
dump = json.JSONEncoder(separators=(",", ":")).encode


def pack_lines(records: Iterable[ClientRecord]) -> str:
    """Records as packed lines: the client, then the rest of the record."""
    parts: list[str] = []
    for record in records:
        parts.append(dump(record["client"]))
        parts.append(dump({k: v for k, v in record.items() if k != "client"}))
    return "\n".join(parts)


def pack_records(records: Iterable[ClientRecord] | Iterable[str]) -> dict[str, Any]:
    """The cached value: records, or chunks already packed with `pack_lines`, as one
    JSON-ready dict (one string in the store, one shared copy in Redis)."""
    chunks = [c if isinstance(c, str) else pack_lines([c]) for c in records]
    return {"format": PACKED_FORMAT, "lines": "\n".join(c for c in chunks if c)}


def post_all(
    postings: Postings,
    keys: Iterable[str],
    position: int,
    share: Callable[[str, str], str] | None,
) -> None:
    """Post `position` under every key of `keys`: the build's hot loop (one call per map
    and client, not per key). A new key is taken through `share`, so equal keys of
    different maps are one string."""
    get = postings.get
    for key in keys:
        bucket = get(key)
        if bucket is None:
            postings[key if share is None else share(key, key)] = position
        elif isinstance(bucket, int):
            if bucket != position:
                postings[key] = array("I", (bucket, position))
        elif bucket[-1] != position:
            bucket.append(position)


def drop(postings: Postings, key: str, position: int) -> None:
    bucket = postings.get(key)
    if bucket is None:
        return
    if isinstance(bucket, int):
        if bucket == position:
            del postings[key]
    elif position in bucket:
        bucket.remove(position)
        if len(bucket) == 1:
            postings[key] = bucket[0]
        elif not bucket:
            del postings[key]


def positions_of(postings: Postings, key: str) -> Sequence[int]:
    bucket = postings.get(key)
    if bucket is None:
        return ()
    if isinstance(bucket, int):
        return (bucket,)
    return bucket


def intersect(buckets: list[Sequence[int]]) -> set[int]:
    ordered = sorted(buckets, key=len)
    found = set(ordered[0])
    for bucket in ordered[1:]:
        found.intersection_update(bucket)
    return found


def line_bounds(text: str) -> array[int]:
    """Start offsets of every line, and the end of the text plus one."""
    bounds = array("I", [0])
    find = text.find
    at = find("\n")
    while at >= 0:
        bounds.append(at + 1)
        at = find("\n", at + 1)
    bounds.append(len(text) + 1)
    return bounds
