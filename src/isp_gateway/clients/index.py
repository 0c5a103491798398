"""The in-process index over the cached client list.

Built once per loaded generation (O(N), light), patched in place on an update:
- exact maps: service id, document, every normalised phone → record positions;
- whole-token postings for name and address (resolve, relevance);
- a search vocabulary: every folded token of name, address, document, phone, city and
  locality → positions. Substring search runs over the vocabulary (a few thousand words plus
  the numbers), not over the clients: the distinct tokens are joined into one string per class
  (numeric, other), a C-speed regex scan finds the tokens containing a query part, and the
  postings of those tokens are the matches. Results per part are memoised per generation.
"""

from __future__ import annotations

import bisect
import heapq
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate, islice
from typing import Any

from isp_gateway.clients.matching import address_tokens, strip_address_prefixes, tokens
from isp_gateway.clients.phones import field_phones, normalize_phone
from isp_gateway.upstream.clients import Client, ClientRecord

_MEMO_SIZE = 512
_BODY_MEMO_SIZE = 100_000
_MIN_TEXT_ANCHOR = 3
_MIN_NUMERIC_ANCHOR = 5
_LETTER = re.compile(r"[^\W\d_]")


def document_key(document: str) -> str:
    # Documents may hold letters; a lookup should not depend on their case.
    return document.strip().upper()


@dataclass
class _Blob:
    text: str
    starts: list[int]
    words: list[str]


def _intersect(buckets: list[list[int]]) -> set[int]:
    ordered = sorted(buckets, key=len)
    found = set(ordered[0])
    for bucket in ordered[1:]:
        found.intersection_update(bucket)
    return found


def _blob(words: list[str]) -> _Blob:
    starts = [0, *accumulate(len(w) + 1 for w in words)]
    return _Blob("\n".join(words), starts, words)


class ClientIndex:
    def __init__(
        self, value: Any, country_code: str, national_length: int, active_states: list[str]
    ) -> None:
        self.cc = country_code
        self.active_states = frozenset(active_states)
        self.national_length = national_length
        records: list[ClientRecord] = value["records"] if value else []
        # The whole records, for the extras other features read (`record`).
        self.records: list[ClientRecord] = list(records)
        self.clients: list[Client] = [r["client"] for r in records]
        self.plan_ids: list[int | None] = [r["plan_id"] for r in records]
        self.by_id: dict[int, int] = {}
        self.by_document: dict[str, list[int]] = {}
        self.by_phone: dict[str, list[int]] = {}
        self.name_postings: dict[str, list[int]] = {}
        self.address_postings: dict[str, list[int]] = {}
        self.vocab: dict[str, list[int]] = {}
        # Each client's search tokens joined by newlines: a query part occurs in a client
        # exactly when `part in text` (parts never hold a newline).
        self._texts: list[str] = []
        self._text_tokens: dict[str, list[str]] = {}
        self._memo: dict[str, set[int]] = {}
        self._blobs: tuple[_Blob, _Blob] | None = None
        # Words added by in-place patches after the blobs were built; scanned directly so
        # an update does not force a rebuild of the whole vocabulary on the event loop.
        self._extra_words: set[str] = set()
        self._active_json: bytes | None = None
        self._found_bodies: dict[int, bytes] = {}
        for position, client in enumerate(self.clients):
            self._add(position, client)
        # Built here, in the loader's thread, so the first search pays nothing.
        self._ensure_blobs()

    # -- building --------------------------------------------------------------------

    @staticmethod
    def _post(postings: dict[str, list[int]], key: str, position: int) -> None:
        bucket = postings.get(key)
        if bucket is None:
            postings[key] = [position]
        elif bucket[-1] != position:
            bucket.append(position)

    def phones_of(self, client: Client) -> list[str]:
        return field_phones(client["phone"], self.cc, self.national_length)

    def _add(self, position: int, client: Client) -> None:
        # Hot loop of the build (50,000 clients in well under a second): each field is
        # tokenised once, and repeated texts (cities, localities) come from a small cache.
        post = self._post
        self.by_id[client["service_id"]] = position
        document = client["document"]
        if document:
            post(self.by_document, document_key(document), position)
        for number in self.phones_of(client):
            post(self.by_phone, number, position)
        name_words = set(tokens(client["name"]))
        for token in name_words:
            post(self.name_postings, token, position)
        address_words = tokens(client["address"])
        for token in set(strip_address_prefixes(address_words)):
            post(self.address_postings, token, position)
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
        for word in words:
            bucket = vocab.get(word)
            if bucket is None:
                vocab[word] = [position]
                if self._blobs is not None:
                    self._extra_words.add(word)
            else:
                bucket.append(position)
        text = "\n".join(words)
        if position == len(self._texts):
            self._texts.append(text)
        else:
            self._texts[position] = text

    def _remove(self, position: int) -> None:
        """Drop a record's exact and search keys (its name/address do not change here)."""
        client = self.clients[position]
        maps: list[tuple[dict[str, list[int]], Iterable[str]]] = [
            (self.by_document, [document_key(client["document"])] if client["document"] else []),
            (self.by_phone, self.phones_of(client)),
            (self.name_postings, tokens(client["name"])),
            (self.address_postings, address_tokens(client["address"])),
            (self.vocab, self._texts[position].split("\n")),
        ]
        for postings, keys in maps:
            for key in set(keys):
                bucket = postings.get(key)
                if bucket and position in bucket:
                    bucket.remove(position)
                    if not bucket:
                        del postings[key]

    def _changed(self) -> None:
        self._memo.clear()
        self._active_json = None
        self._found_bodies.clear()

    def replace(self, record: ClientRecord) -> None:
        """Patch one record in place (after an update, or a new client found upstream)."""
        client = record["client"]
        position = self.by_id.get(client["service_id"])
        if position is None:
            position = len(self.clients)
            self.clients.append(client)
            self.plan_ids.append(record["plan_id"])
            self.records.append(record)
        else:
            self._remove(position)
            self.clients[position] = client
            self.plan_ids[position] = record["plan_id"]
            self.records[position] = record
        self._add(position, client)
        self._changed()

    # -- lookups ---------------------------------------------------------------------

    def get(self, service_id: int) -> Client | None:
        position = self.by_id.get(service_id)
        return None if position is None else self.clients[position]

    def record(self, service_id: int) -> ClientRecord | None:
        """The whole record (client and extras such as username or router id)."""
        position = self.by_id.get(service_id)
        return None if position is None else self.records[position]

    def plan_id(self, service_id: int) -> int | None:
        position = self.by_id.get(service_id)
        return None if position is None else self.plan_ids[position]

    def by_doc(self, document: str) -> Client | None:
        return self._pick(self.by_document.get(document_key(document)))

    def by_phone_number(self, number: str) -> Client | None:
        return self._pick(self.by_phone.get(number))

    def _pick(self, positions: list[int] | None) -> Client | None:
        """One client of several sharing a key: an active one first, then the lowest id."""
        if not positions:
            return None
        candidates = [self.clients[p] for p in positions]
        return min(
            candidates,
            key=lambda c: (c["payment_status"] not in self.active_states, c["service_id"]),
        )

    def found_body(self, client: Client) -> bytes:
        """The whole `client_found` envelope for a fresh hit, serialised once per client and
        generation, byte for byte what the regular route renders."""
        body = self._found_bodies.get(client["service_id"])
        if body is None:
            envelope = {
                "ok": True,
                "type": "success",
                "action": "client_found",
                "data": client,
                "message": None,
                "meta": None,
            }
            body = json.dumps(
                envelope, ensure_ascii=False, allow_nan=False, separators=(",", ":")
            ).encode()
            if len(self._found_bodies) >= _BODY_MEMO_SIZE:
                self._found_bodies.clear()
            self._found_bodies[client["service_id"]] = body
        return body

    def active_json(self) -> bytes:
        """The JSON array of active clients, serialised once per generation."""
        if self._active_json is None:
            active = [c for c in self.clients if c["payment_status"] in self.active_states]
            self._active_json = json.dumps(
                active, ensure_ascii=False, separators=(",", ":")
            ).encode()
        return self._active_json

    # -- resolve candidates ----------------------------------------------------------

    def candidates(self, words: list[str], *, address: bool = False) -> list[Client]:
        """Clients whose name (or address) holds every word as a whole token."""
        postings = self.address_postings if address else self.name_postings
        buckets = [postings.get(word) or [] for word in words]
        if not words or any(not b for b in buckets):
            return []
        found = _intersect(buckets)
        return [self.clients[p] for p in sorted(found)]

    # -- search ----------------------------------------------------------------------

    def _ensure_blobs(self) -> tuple[_Blob, _Blob]:
        if self._blobs is None:
            numeric = sorted(w for w in self.vocab if w.isdigit())
            other = sorted(w for w in self.vocab if not w.isdigit())
            self._blobs = (_blob(numeric), _blob(other))
        return self._blobs

    def _part_positions(self, part: str) -> set[int]:
        found = self._memo.get(part)
        if found is not None:
            return found
        numeric, other = self._ensure_blobs()
        blobs = (numeric, other) if part.isdigit() else (other,)
        pattern = re.compile(re.escape(part))
        words: set[str] = set()
        for blob in blobs:
            last = -1
            for match in pattern.finditer(blob.text):
                index = bisect.bisect_right(blob.starts, match.start()) - 1
                if index != last:
                    words.add(blob.words[index])
                    last = index
        words.update(w for w in self._extra_words if part in w)
        vocab = self.vocab
        # A patched record may have dropped a word the blob still lists.
        found = set().union(*(vocab.get(w, ()) for w in words)) if words else set()
        if len(self._memo) >= _MEMO_SIZE:
            self._memo.pop(next(iter(self._memo)))
        self._memo[part] = found
        return found

    def _anchorable(self, part: str) -> bool:
        # Short parts ("3", "96", "a") occur in tens of thousands of vocabulary words:
        # collecting their postings costs more than filtering candidates by them.
        return len(part) >= (_MIN_NUMERIC_ANCHOR if part.isdigit() else _MIN_TEXT_ANCHOR)

    def search(self, query: str, limit: int) -> list[Client]:
        """Every query token (its alphanumeric parts) must occur in a searchable field;
        ordered exact document/phone first, then whole-token name matches, then the rest.

        The most selective long part gives the candidates (from the vocabulary); the other
        parts filter them with a substring test on each candidate's joined tokens. With no
        long part, clients are walked in order and the walk stops once the page is full."""
        parts: list[str] = []
        for word in query.split():
            for part in tokens(word):
                if part not in parts:
                    parts.append(part)
        if not parts:
            return []
        texts = self._texts

        def holds_all(position: int, needed: list[str]) -> bool:
            text = texts[position]
            return all(p in text for p in needed)

        exact: list[int] = []
        single = query.split()
        if len(single) == 1:
            exact += self.by_document.get(document_key(single[0]), [])
            # Only a phone-like word (digits and symbols) is a phone: "pedro3001234567"
            # must not stand for 3001234567, which "pedro" does not match.
            number = (
                ""
                if _LETTER.search(single[0])
                else normalize_phone(single[0], self.cc, self.national_length)
            )
            if number:
                exact += [p for p in self.by_phone.get(number, []) if p not in exact]
        named = [self.name_postings.get(p) or [] for p in parts]
        whole = _intersect(named) if all(named) else set()

        anchors = [p for p in parts if self._anchorable(p)]
        if anchors:
            sets = sorted((self._part_positions(p) for p in anchors), key=len)
            matches = sets[0]  # memoised and shared: never changed in place
            for other in sets[1:]:
                matches = matches & other
                if not matches:
                    break
            rest_parts = [p for p in parts if p not in anchors]
            if rest_parts and matches:
                matches = {p for p in matches if holds_all(p, rest_parts)}
            whole &= matches
        else:
            matches = None
            whole = {p for p in whole if holds_all(p, parts)}

        ordered = list(exact)
        seen = set(exact)
        for position in sorted(whole - seen):
            if len(ordered) >= limit:
                break
            ordered.append(position)
        seen |= whole
        room = limit - len(ordered)
        if room > 0:
            if matches is None:
                # No selective part: walk in order and stop as soon as the page is full.
                walk = (p for p in range(len(texts)) if p not in seen and holds_all(p, parts))
                ordered += islice(walk, room)
            else:
                rest = matches - seen if seen else matches
                if len(rest) * 8 > len(texts):
                    ordered += islice((p for p in range(len(texts)) if p in rest), room)
                else:
                    ordered += heapq.nsmallest(room, rest) if len(rest) > room else sorted(rest)
        return [self.clients[p] for p in ordered[:limit]]
