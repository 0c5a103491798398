"""The ticket subject catalogue: the upstream's category names by priority, as data.

The package ships `isp_gateway/data/ticket_subjects.json` (keys "1".."4" → subject lists, the
same file the simulator reads); an operator replaces it with `TICKET_SUBJECTS_FILE` in the
same shape when their upstream account has other categories.
"""

from __future__ import annotations

import difflib
import json
import unicodedata
from importlib import resources
from pathlib import Path
from typing import Any

from isp_gateway.kit.text import fold
from isp_gateway.settings import ConfigurationError, Settings

PRIORITY_NAMES = {1: "low", 2: "normal", 3: "high", 4: "very_high"}


class SubjectCatalogue:
    def __init__(self, by_priority: dict[int, list[str]]) -> None:
        self.by_priority = by_priority
        self._priority = {s: p for p, names in by_priority.items() for s in names}
        # The same text in another Unicode form (a decomposed "ñ" from some keyboards) is the
        # same subject; the upstream gets the catalogue's spelling.
        self._composed = {unicodedata.normalize("NFC", s): s for s in self._priority}
        self._folded = {fold(s): s for s in self._priority}

    @classmethod
    def load(cls, path: Path | None = None) -> SubjectCatalogue:
        """The operator's file when given, else the packaged catalogue. A malformed file
        stops start-up with a message naming it (a wrong catalogue would refuse tickets)."""
        if path is None:
            text = resources.files("isp_gateway").joinpath("data/ticket_subjects.json")
            source, raw_text = "the packaged catalogue", text.read_text("utf-8")
        else:
            source = f"TICKET_SUBJECTS_FILE {path}"
            try:
                raw_text = path.read_text("utf-8")
            except OSError as exc:
                raise ConfigurationError(f"{source}: cannot read ({exc.strerror})") from None
        try:
            raw = json.loads(raw_text)
        except ValueError:
            raise ConfigurationError(f"{source}: not valid JSON") from None
        return cls(_validate(raw, source))

    def priority_of(self, subject: str) -> int | None:
        return self._priority.get(subject)

    def canonical(self, subject: str) -> str | None:
        """The catalogue's spelling of a subject given as is (up to Unicode form); else None."""
        if subject in self._priority:
            return subject
        return self._composed.get(unicodedata.normalize("NFC", subject))

    def suggestion(self, subject: str) -> str | None:
        """The catalogue spelling of a subject that differs only in case, accents or spaces."""
        return self._folded.get(fold(subject))

    def closest(self, subject: str) -> str | None:
        """The subject a refused one most likely meant: the same words in another case or
        accent, else the most similar subject (when one is reasonably close), for the
        answer that refuses it; never used in its place."""
        exact = self.suggestion(subject)
        if exact is not None:
            return exact
        folded = fold(subject)
        near = difflib.get_close_matches(folded, list(self._folded), n=1, cutoff=0.6)
        return self._folded[near[0]] if near else None

    def as_data(self) -> dict[str, Any]:
        return {
            "by_priority": {
                name: list(self.by_priority.get(level, []))
                for level, name in PRIORITY_NAMES.items()
            },
            "all": [s for level in sorted(self.by_priority) for s in self.by_priority[level]],
        }


def _validate(raw: Any, source: str) -> dict[int, list[str]]:
    if not isinstance(raw, dict) or not raw:
        raise ConfigurationError(f'{source}: expected an object like {{"1": ["..."], ...}}')
    out: dict[int, list[str]] = {}
    seen: set[str] = set()
    for key, names in raw.items():
        level = int(key) if isinstance(key, str) and key.strip().isdigit() else None
        if level not in PRIORITY_NAMES:
            raise ConfigurationError(f"{source}: priority keys must be 1 to 4, got {key!r}")
        if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
            raise ConfigurationError(f"{source}: priority {key} must list non-empty strings")
        for name in names:
            if name in seen:
                raise ConfigurationError(f"{source}: subject {name!r} is listed twice")
            seen.add(name)
        out[level] = list(names)
    return out


def document_subjects(settings: Settings, components: dict[str, Any]) -> None:
    """The subjects a ticket may have, from the catalogue this deployment loads, as the
    enum of the creation body's `subject` in the OpenAPI document."""
    try:
        catalogue = SubjectCatalogue.load(settings.TICKET_SUBJECTS_FILE)
    except ConfigurationError:
        return  # the lifespan stops start-up with the message
    subject = components.get("CreateTicketRequest", {}).get("properties", {}).get("subject")
    if subject is not None:
        subject["enum"] = catalogue.as_data()["all"]
        subject["description"] = (
            subject.get("description", "") + " (the `all` list of GET /api/v1/tickets/subjects)"
        ).strip()
