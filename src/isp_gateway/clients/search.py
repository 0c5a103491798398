"""Search over the client index (spec 4.4): a vocabulary of every folded token of name,
address, document, phone, city and locality → positions. Substring search runs over the
vocabulary (a few thousand words plus the numbers), not over the clients: the distinct tokens
are joined into one string per class (numeric, other), a C-speed regex scan finds the tokens
containing a query part, and the postings of those tokens are the matches. Results per part
are memoised per generation.
"""

from __future__ import annotations

import bisect
import heapq
import re
from array import array
from dataclasses import dataclass
from itertools import accumulate, islice

from isp_gateway.clients.matching import tokens
from isp_gateway.clients.packed import Postings, document_key, intersect, positions_of
from isp_gateway.clients.phones import normalize_phone
from isp_gateway.upstream.clients import Client

MEMO_SIZE = 512
_MIN_TEXT_ANCHOR = 3
_MIN_NUMERIC_ANCHOR = 5
_LETTER = re.compile(r"[^\W\d_]")


@dataclass
class _Blob:
    text: str
    starts: array[int]
    words: list[str]


def _blob(words: list[str]) -> _Blob:
    starts = array("I", [0, *accumulate(len(w) + 1 for w in words)])
    return _Blob("\n".join(words), starts, words)


class Searchable:
    """The search half of ClientIndex (index.py), which builds and patches what it reads:
    the vocabulary, each client's joined tokens and the exact maps."""

    cc: str
    national_length: int
    by_document: Postings
    by_phone: Postings
    name_postings: Postings
    vocab: Postings
    # Each client's search tokens joined by newlines: a query part occurs in a client
    # exactly when `part in text` (parts never hold a newline).
    _texts: list[str]
    _memo: dict[str, set[int]]
    _totals: dict[str, int]  # search totals of full pages, by query
    _blobs: tuple[_Blob, _Blob] | None
    # Words added by in-place patches after the blobs were built; scanned directly so an
    # update does not force a rebuild of the whole vocabulary on the event loop.
    _extra_words: set[str]

    def _lines(self, position: int) -> tuple[str, str]:
        raise NotImplementedError

    def _client(self, position: int) -> Client:
        raise NotImplementedError

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
        found = set()
        for word in words:
            found.update(positions_of(vocab, word))
        if len(self._memo) >= MEMO_SIZE:
            self._memo.pop(next(iter(self._memo)))
        self._memo[part] = found
        return found

    def _anchorable(self, part: str) -> bool:
        # Short parts ("3", "96", "a") occur in tens of thousands of vocabulary words:
        # collecting their postings costs more than filtering candidates by them.
        return len(part) >= (_MIN_NUMERIC_ANCHOR if part.isdigit() else _MIN_TEXT_ANCHOR)

    def search(self, query: str, limit: int) -> list[Client]:
        """The clients `search_json` lists, decoded."""
        return [self._client(p) for p in self._search(query, limit)[0]]

    def search_json(self, query: str, limit: int) -> tuple[bytes, int, int]:
        """The matches as a JSON array joined from the packed lines without decoding them
        (a page of 50 decoded and encoded again cost more than the search), how many, and
        how many match in all (CALLERS.md 2 `meta.total`)."""
        positions, total = self._search(query, limit)
        body = "[" + ",".join([self._lines(p)[0] for p in positions]) + "]"
        return body.encode(), len(positions), total

    def _search(self, query: str, limit: int) -> tuple[list[int], int]:
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
            return [], 0
        texts = self._texts

        def holds_all(position: int, needed: list[str]) -> bool:
            text = texts[position]
            return all(p in text for p in needed)

        exact: list[int] = []
        single = query.split()
        if len(single) == 1:
            exact += positions_of(self.by_document, document_key(single[0]))
            # Only a phone-like word (digits and symbols) is a phone: "pedro3001234567"
            # must not stand for 3001234567, which "pedro" does not match.
            number = (
                ""
                if _LETTER.search(single[0])
                else normalize_phone(single[0], self.cc, self.national_length)
            )
            if number:
                exact += [p for p in positions_of(self.by_phone, number) if p not in exact]
        named = [positions_of(self.name_postings, p) for p in parts]
        whole = intersect(named) if all(named) else set()

        anchors = [p for p in parts if self._anchorable(p)]
        if anchors:
            sets = sorted((self._part_positions(p) for p in anchors), key=len)
            matches = sets[0]  # memoised and shared: never changed in place
            for other in sets[1:]:
                matches = matches & other
                if not matches:
                    break
            # Short parts left ("ana 12": thousands of candidates for "ana") are tested
            # lazily: the whole-token name matches now (few), the rest in order until the
            # page is full, instead of every candidate before a page of 50 is taken.
            pending = [p for p in parts if p not in anchors] if matches else []
            whole &= matches
            if pending:
                whole = {p for p in whole if holds_all(p, pending)}
        else:
            matches = None
            pending = []
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
                if pending:
                    in_order = range(len(texts)) if len(rest) * 8 > len(texts) else sorted(rest)
                    found = (p for p in in_order if p in rest and holds_all(p, pending))
                    ordered += islice(found, room)
                elif len(rest) * 8 > len(texts):
                    ordered += islice((p for p in range(len(texts)) if p in rest), room)
                else:
                    ordered += heapq.nsmallest(room, rest) if len(rest) > room else sorted(rest)
        if len(ordered) < limit:
            # The page is not full: every match is on it.
            return ordered, len(ordered)
        # A full page: count the matches it left out (the walk above stopped early), once
        # per query and generation.
        total = self._totals.get(query)
        if total is None:
            if matches is None:
                # No selective part: a plain count over the joined tokens (the cheapest walk).
                if len(parts) == 1:
                    only = parts[0]
                    total = sum(only in text for text in texts)
                else:
                    total = sum(all(p in text for p in parts) for text in texts)
                total += sum(1 for p in set(exact) if not holds_all(p, parts))
            else:
                every = {p for p in matches if holds_all(p, pending)} if pending else matches
                total = len(every) + sum(1 for p in set(exact) if p not in every)
            if len(self._totals) >= MEMO_SIZE:
                self._totals.pop(next(iter(self._totals)))
            self._totals[query] = total
        return ordered[:limit], total
