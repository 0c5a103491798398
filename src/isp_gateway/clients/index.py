"""The in-process index over the cached client list, compact enough for 200,000 clients.

The cached value is packed (`pack_records`, packed.py): one string of JSON lines, two per
record. The index keeps that string and decodes a record only when it is asked for: no
per-client dict is held. Around it, built once per loaded generation (O(N)) and patched in
place on an update:
- service ids: a sorted integer array (bisect), plus a small map for records added later;
- exact maps: document, every normalised phone → a position (an int), or an `array('I')`
  of positions when several records share the key;
- whole-token postings for name and address (resolve, relevance), in the same form;
- a search vocabulary, searched by the `Searchable` half of the class (search.py).
Equal key strings are shared between the maps (one copy per distinct string).
"""

from __future__ import annotations

import bisect
import json
import re
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, cast

from isp_gateway.clients.matching import address_tokens, strip_address_prefixes, tokens
from isp_gateway.clients.packed import (
    PACKED_FORMAT,
    Postings,
    document_key,
    drop,
    dump,
    intersect,
    line_bounds,
    pack_lines,
    pack_records,
    positions_of,
    post_all,
)
from isp_gateway.clients.phones import field_phones
from isp_gateway.clients.search import Searchable
from isp_gateway.kit.actions import Action
from isp_gateway.upstream.clients import Client, ClientRecord
from isp_gateway.web.envelope import encode, success

# What other modules (and the tests) import from here.
__all__ = [
    "PACKED_FORMAT",
    "ClientIndex",
    "document_key",
    "line_bounds",
    "pack_lines",
    "pack_records",
]

_BODY_MEMO_SIZE = 10_000
# Below this many clients the active list's JSON is kept between requests; above it, it is
# joined per request from the packed lines (tens of megabytes are not worth holding).
_ACTIVE_MEMO_CLIENTS = 20_000
_NAMES_ROUTER = re.compile(r'"router_id":\d')
# The client fields the index is built from (map_client writes them first), and the key
# that follows them in a packed client.
_INDEXED = frozenset({"service_id", "name", "document", "phone", "address", "city", "locality"})
_INDEXED_END = ',"payment_status":'


class ClientIndex(Searchable):
    def __init__(
        self, value: Any, country_code: str, national_length: int, active_states: list[str]
    ) -> None:
        self.cc = country_code
        self.active_states = frozenset(active_states)
        self.national_length = national_length
        if isinstance(value, dict) and "records" in value:
            # A list cached by an older version (a dict per record): packed on adoption.
            value = pack_records(value["records"])
        text: str = value["lines"] if value else ""
        self._text = text
        bounds = line_bounds(text) if text else array("I", [0])
        self._bounds = bounds
        self._base = (len(bounds) - 1) // 2
        # Records patched or added after the load: position → (client JSON, rest JSON).
        self._patched: dict[int, tuple[str, str]] = {}
        self._count = self._base
        self._added_ids: dict[int, int] = {}
        self.by_document: Postings = {}
        self.by_phone: Postings = {}
        self.name_postings: Postings = {}
        self.address_postings: Postings = {}
        # The search's structures (declared and explained in search.py).
        self.vocab = {}
        self._texts = []
        self._memo = {}
        self._totals = {}
        self._blobs = None
        self._extra_words = set()
        self._strings: dict[str, str] | None = {}
        self._text_tokens: dict[str, list[str]] = {}
        self._active_json: bytes | None = None
        self._found_bodies: dict[int, bytes] = {}
        self._found_alone: dict[int, bytes] = {}  # as _found_bodies, with no other service
        # The fast path's answers: by position for a service id (n >= 0) or a key one client
        # holds (-2 - n), by (kind, position) for a shared key.
        self._bodies_at: dict[int | tuple[str, int], bytes] = {}
        ids: list[int] = []
        for position, client in enumerate(self._decode_all()):
            ids.append(client["service_id"])
            self._add(position, client)
        # Service ids sorted, with their positions: a duplicate id keeps its last record.
        order = sorted(range(len(ids)), key=ids.__getitem__)
        self._ids = array("q", (ids[p] for p in order))
        self._id_positions = array("I", order)
        # Built here, in the loader's thread, so the first search pays nothing.
        self._ensure_blobs()
        self._strings = None  # only the build shares strings; patches are few
        self._text_tokens = {}

    def __len__(self) -> int:
        return self._count

    # -- records ---------------------------------------------------------------------

    def _lines(self, position: int) -> tuple[str, str]:
        patched = self._patched.get(position)
        if patched is not None:
            return patched
        bounds, text = self._bounds, self._text
        line = 2 * position
        client = text[bounds[line] : bounds[line + 1] - 1]
        rest = text[bounds[line + 1] : bounds[line + 2] - 1]
        return client, rest

    def _client(self, position: int) -> Client:
        return cast(Client, json.loads(self._lines(position)[0]))

    def _decode_all(self, batch: int = 1000) -> Iterator[Client]:
        """Every loaded client in order, with at least the fields the index reads, decoded a
        batch at a time (one `json.loads` of a thousand clients costs less than a thousand
        calls, and only a batch is held). Those fields come first in a packed client, so
        only the line up to `payment_status` is decoded (a quote inside a value is escaped,
        so the marker cannot occur in one); a line packed in another order is decoded
        whole."""
        bounds, text = self._bounds, self._text
        for first in range(0, self._base, batch):
            lines = [
                text[bounds[2 * p] : bounds[2 * p + 1] - 1]
                for p in range(first, min(first + batch, self._base))
            ]
            heads = []
            for line in lines:
                cut = line.find(_INDEXED_END)
                heads.append(line[:cut] + "}" if cut > 0 else line)
            for line, client in zip(lines, json.loads("[" + ",".join(heads) + "]"), strict=True):
                yield client if client.keys() >= _INDEXED else json.loads(line)

    def _record(self, position: int) -> ClientRecord:
        client, rest = self._lines(position)
        record: dict[str, Any] = json.loads(rest)
        record["client"] = json.loads(client)
        return cast(ClientRecord, record)

    def _position(self, service_id: int) -> int | None:
        position = self._added_ids.get(service_id)
        if position is not None:
            return position
        ids = self._ids
        at = bisect.bisect_right(ids, service_id) - 1
        if at >= 0 and ids[at] == service_id:
            return self._id_positions[at]
        return None

    # -- building --------------------------------------------------------------------

    def phones_of(self, client: Client) -> list[str]:
        return field_phones(client["phone"], self.cc, self.national_length)

    def _add(self, position: int, client: Client) -> None:
        # Hot loop of the build: each field is tokenised once, repeated texts (cities,
        # localities) come from a small cache, and each map takes all of a client's keys
        # in one call.
        strings = self._strings
        share = None if strings is None else strings.setdefault
        document = client["document"]
        if document:
            post_all(self.by_document, (document_key(document),), position, share)
        post_all(self.by_phone, self.phones_of(client), position, share)
        name_words = set(tokens(client["name"]))
        post_all(self.name_postings, name_words, position, share)
        address_words = tokens(client["address"])
        post_all(self.address_postings, set(strip_address_prefixes(address_words)), position, share)
        words = name_words.union(address_words)
        cache = self._text_tokens
        for field in ("document", "phone", "city", "locality"):
            value = client[field]
            if value:
                cached = cache.get(value)
                if cached is None:
                    cached = tokens(value)
                    if field in ("city", "locality"):
                        cache[value] = cached
                words.update(cached)
        vocab = self.vocab
        if self._blobs is not None:
            # A patch after the build: words the blobs do not list are scanned apart.
            self._extra_words.update(w for w in words if w not in vocab)
        post_all(vocab, words, position, share)
        text = "\n".join(words)
        if position == len(self._texts):
            self._texts.append(text)
        else:
            self._texts[position] = text

    def _remove(self, position: int) -> None:
        """Drop a record's exact and search keys (its name/address do not change here)."""
        client = self._client(position)
        maps: list[tuple[Postings, Iterable[str]]] = [
            (self.by_document, [document_key(client["document"])] if client["document"] else []),
            (self.by_phone, self.phones_of(client)),
            (self.name_postings, tokens(client["name"])),
            (self.address_postings, address_tokens(client["address"])),
            (self.vocab, self._texts[position].split("\n")),
        ]
        for postings, keys in maps:
            for key in set(keys):
                drop(postings, key, position)

    def _changed(self) -> None:
        self._memo.clear()
        self._totals.clear()
        self._active_json = None
        self._found_bodies.clear()
        self._found_alone.clear()
        self._bodies_at.clear()

    def replace(self, record: ClientRecord) -> None:
        """Patch one record in place (after an update, or a new client found upstream).
        Keys of the record besides the client (`plan_id` and any other) are kept."""
        client = record["client"]
        service_id = client["service_id"]
        position = self._position(service_id)
        rest = {k: v for k, v in record.items() if k != "client"}
        if position is None:
            position = self._count
            self._count += 1
            self._added_ids[service_id] = position
        else:
            self._remove(position)
        self._patched[position] = (dump(client), dump(rest))
        self._add(position, client)
        self._changed()

    # -- lookups ---------------------------------------------------------------------

    def get(self, service_id: int) -> Client | None:
        position = self._position(service_id)
        return None if position is None else self._client(position)

    def record(self, service_id: int) -> ClientRecord | None:
        """The whole cached record (the client and every other key it carries)."""
        position = self._position(service_id)
        return None if position is None else self._record(position)

    def on_router(self, router_id: int) -> list[Client] | None:
        """The clients whose row names the router (a general outage's services), or None when
        no row names any router (the accounts whose rows carry none). A key appears once in
        a compact JSON object, so the rest lines are matched as text: only matches decode."""
        marks = (f'"router_id":{router_id},', f'"router_id":{router_id}}}')
        found, named = [], False
        for position in range(self._count):
            client, rest = self._lines(position)
            named = named or _NAMES_ROUTER.search(rest) is not None
            if any(mark in rest for mark in marks):
                found.append(cast(Client, json.loads(client)))
        return found if named else None

    def plan_id(self, service_id: int) -> int | None:
        record = self.record(service_id)
        return None if record is None else record.get("plan_id")

    def _choose(self, positions: Sequence[int]) -> int | None:
        """The position of one client of several sharing a key: an active one first, then
        the lowest id. A key held by one client (nearly all) needs no decoding."""
        if not positions:
            return None
        if len(positions) == 1:
            return positions[0]

        def rank(position: int) -> tuple[bool, int]:
            client = self._client(position)
            return client["payment_status"] not in self.active_states, client["service_id"]

        return min(positions, key=rank)

    def _pick(self, positions: Sequence[int]) -> Client | None:
        position = self._choose(positions)
        return None if position is None else self._client(position)

    def _others(self, positions: Sequence[int], chosen: int) -> list[int]:
        """The service ids, ascending, of the other clients sharing a key (CALLERS.md 2
        `meta.other_service_ids`). A key held by one client (nearly all) decodes nothing."""
        if len(positions) < 2:
            return []
        return sorted({self._client(p)["service_id"] for p in positions if p != chosen})

    def found_with_others(self, kind: str, key: str) -> tuple[Client, list[int]] | None:
        """A lookup by `document` or `phone` (normalised): the chosen client and the other
        services sharing the key, or None on a miss."""
        positions = self._key_positions(kind, key)
        position = self._choose(positions)
        if position is None:
            return None
        return self._client(position), self._others(positions, position)

    def _key_positions(self, kind: str, key: str) -> Sequence[int]:
        if kind == "document":
            return positions_of(self.by_document, document_key(key))
        return positions_of(self.by_phone, key)

    def hit_body(self, kind: str, key: str | int) -> bytes | None:
        """The `client_found` envelope of a lookup by `document`, `phone` (normalised) or
        `service_id`, or None on a miss: the lookup fast path's answer, memoised by position
        so a repeated hit decodes nothing. A document or phone answer carries
        `meta.other_service_ids`; a key shared by several clients (rare) is memoised apart,
        by kind and position, as its list depends on the key."""
        others: list[int] | None = None
        memo_key: int | tuple[str, int]
        if kind == "service_id":
            position = self._position(int(key))
            memo_key = -1 if position is None else position
        else:
            positions = self._key_positions(kind, str(key))
            position = self._choose(positions)
            if position is not None and len(positions) > 1:
                memo_key = (kind, position)
            else:
                memo_key = -2 - position if position is not None else -1
        if position is None:
            return None
        body = self._bodies_at.get(memo_key)
        if body is None:
            if kind != "service_id":
                others = self._others(self._key_positions(kind, str(key)), position)
            body = self.found_body(self._client(position), others)
            if len(self._bodies_at) >= _BODY_MEMO_SIZE:
                self._bodies_at.clear()
            self._bodies_at[memo_key] = body
        return body

    def found_body(self, client: Client, others: list[int] | None = None) -> bytes:
        """The whole `client_found` envelope for a fresh hit, byte for byte what the regular
        route renders: `meta` null for a service id, `{"other_service_ids": [...]}` for a
        document or phone. A client alone on its key is serialised once per generation."""
        memo = others is not None and not others
        cache = self._found_bodies if others is None else self._found_alone
        body = cache.get(client["service_id"]) if others is None or memo else None
        if body is None:
            meta = None if others is None else {"other_service_ids": others}
            body = encode(success(Action.CLIENT_FOUND, client, meta=meta))
            if others is None or memo:
                if len(cache) >= _BODY_MEMO_SIZE:
                    cache.clear()
                cache[client["service_id"]] = body
        return body

    def active_json(self) -> bytes:
        """The JSON array of active clients, joined from the packed lines without decoding
        them: a key appears once in a compact JSON object, so the status is a substring."""
        if self._active_json is not None:
            return self._active_json
        marks = tuple(f'"payment_status":{dump(state)},' for state in self.active_states)
        parts = [
            line
            for line in (self._lines(p)[0] for p in range(self._count))
            if any(mark in line for mark in marks)
        ]
        body = ("[" + ",".join(parts) + "]").encode()
        if self._count <= _ACTIVE_MEMO_CLIENTS:
            self._active_json = body
        return body

    # -- resolve candidates ----------------------------------------------------------

    def candidates(self, words: list[str], *, address: bool = False) -> list[Client]:
        """Clients whose name (or address) holds every word as a whole token."""
        postings = self.address_postings if address else self.name_postings
        buckets = [positions_of(postings, word) for word in words]
        if not words or any(not b for b in buckets):
            return []
        found = intersect(buckets)
        return [self._client(p) for p in sorted(found)]
