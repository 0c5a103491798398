"""A payment report's `multipart/form-data` body, read as it arrives (MONEY.md 2).

The parts are parsed from the request's stream with python-multipart's streaming parser, not
Starlette's `request.form()`, which spools a file over 1 MB to a temporary file on disk: a
customer's receipt is never written to disk, logged or kept. It is held in memory, at most
RECEIPT_MAX_BYTES, only until the backend has it (docs/payments.md says why it is held
rather than piped through). Its type is recognised by its first bytes (JPEG, PNG, WEBP,
PDF), never by its name or declared type: a file that is none of them is refused with 415 as
soon as its first bytes arrive, and one past the cap with 413 as soon as it passes it,
either way with the rest of the body left unread (the connection closes after the answer).
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header

from isp_gateway.payments.errors import InvalidField, ReceiptTooLarge, UnsupportedReceipt

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

RECEIPT = "receipt"
# The text fields of a report; any other part is refused (a typo must not pass unseen).
FIELDS = ("reference", "paid_on", "payment_method_id", "amount", "invoice_id")
MAX_PARTS = len(FIELDS) + 1
# The text parts together: far above what valid fields need, far below the body limit.
MAX_FIELD_BYTES = 4096
# Sent on to the backend in pieces of this size (a memoryview each: no copy of the whole).
CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class ReceiptKind:
    name: str
    media_type: str


JPEG = ReceiptKind("jpeg", "image/jpeg")
PNG = ReceiptKind("png", "image/png")
WEBP = ReceiptKind("webp", "image/webp")
PDF = ReceiptKind("pdf", "application/pdf")
# What a kind's first bytes must be: enough to recognise it from the first chunk.
SNIFF_BYTES = 12


def sniff(head: bytes) -> ReceiptKind | None:
    """The kind of a file from its first bytes (their magic numbers), or None."""
    if head.startswith(b"\xff\xd8\xff"):
        return JPEG
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return PNG
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return WEBP
    # Strictly at the start (readers tolerate junk before it; a receipt has no reason to).
    if head.startswith(b"%PDF-"):
        return PDF
    return None


@dataclass(slots=True)
class Receipt:
    content: bytearray
    kind: ReceiptKind
    filename: str | None

    @property
    def size(self) -> int:
        return len(self.content)

    def digest(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    async def chunks(self) -> AsyncIterator[bytes]:
        view = memoryview(self.content)
        for start in range(0, len(view), CHUNK):
            yield view[start : start + CHUNK]  # type: ignore[misc]


@dataclass(slots=True)
class ReportForm:
    fields: dict[str, str] = field(default_factory=dict)
    receipt: Receipt | None = None


def _invalid(problem: str) -> InvalidField:
    return InvalidField("", problem, "report_form")


class _Reader:
    """python-multipart's callbacks, gathering the text fields and the receipt."""

    def __init__(self, max_receipt: int) -> None:
        self.max_receipt = max_receipt
        self.form = ReportForm()
        self.parts = 0
        self.field_bytes = 0
        self.ended = False
        self._header_name = b""
        self._header_value = b""
        self._disposition = b""
        self._name: str | None = None
        self._filename: str | None = None
        self._data = bytearray()
        self._kind: ReceiptKind | None = None

    def callbacks(self) -> MultipartCallbacks:
        return {
            "on_part_begin": self.on_part_begin,
            "on_part_data": self.on_part_data,
            "on_part_end": self.on_part_end,
            "on_header_field": self.on_header_field,
            "on_header_value": self.on_header_value,
            "on_header_end": self.on_header_end,
            "on_headers_finished": self.on_headers_finished,
            "on_end": self.on_end,
        }

    def on_part_begin(self) -> None:
        self.parts += 1
        if self.parts > MAX_PARTS:
            raise _invalid(f"more than {MAX_PARTS} parts")
        self._disposition, self._name, self._filename = b"", None, None
        self._data = bytearray()
        self._kind = None

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._header_name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def on_header_end(self) -> None:
        if self._header_name.strip().lower() == b"content-disposition":
            self._disposition = self._header_value
        self._header_name, self._header_value = b"", b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self._disposition)
        name = options.get(b"name")
        if name is None:
            raise _invalid("a part without a name")
        text = name.decode("utf-8", "replace")
        if text != RECEIPT and text not in FIELDS:
            raise InvalidField(text[:40], "not a field of a payment report", "extra_field")
        if text in self.form.fields or (text == RECEIPT and self.form.receipt is not None):
            raise InvalidField(text, "sent twice", "repeated_field")
        self._name = text
        filename = options.get(b"filename")
        self._filename = None if filename is None else filename.decode("utf-8", "replace")

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        piece = data[start:end]
        if self._name != RECEIPT:
            self.field_bytes += len(piece)
            if self.field_bytes > MAX_FIELD_BYTES:
                raise ReceiptTooLarge("report_fields", MAX_FIELD_BYTES)
            self._data.extend(piece)
            return
        if len(self._data) + len(piece) > self.max_receipt:
            raise ReceiptTooLarge("receipt", self.max_receipt)
        self._data.extend(piece)
        if self._kind is None and len(self._data) >= SNIFF_BYTES:
            self._recognise()

    def _recognise(self) -> None:
        kind = sniff(bytes(self._data[:SNIFF_BYTES]))
        if kind is None:
            raise UnsupportedReceipt()
        self._kind = kind

    def on_part_end(self) -> None:
        if self._name == RECEIPT:
            if not self._data:
                raise InvalidField(RECEIPT, "the file is empty", "empty_receipt")
            if self._kind is None:
                self._recognise()
            assert self._kind is not None
            self.form.receipt = Receipt(self._data, self._kind, self._filename)
        elif self._name is not None:
            try:
                self.form.fields[self._name] = self._data.decode("utf-8")
            except UnicodeDecodeError:
                raise InvalidField(self._name, "not UTF-8 text", "unreadable_field") from None
        self._data = bytearray()

    def on_end(self) -> None:
        self.ended = True


def boundary_of(content_type: str | None) -> bytes:
    """The multipart boundary of a request's Content-Type, or 422 naming the body."""
    kind, options = parse_options_header(content_type or "")
    boundary = options.get(b"boundary")
    if kind != b"multipart/form-data" or not boundary or len(boundary) > 200:
        raise _invalid("must be multipart/form-data with a boundary")
    return boundary


async def read_report_form(
    content_type: str | None, body: AsyncIterable[bytes], *, max_receipt: int
) -> ReportForm:
    """The text fields and the receipt of a report's body, read chunk by chunk: 422 for a
    form that is not one (the body named), 413 past the caps, 415 for a receipt that is not
    a JPEG, PNG, WEBP or PDF; raised as soon as it is known, the rest left unread."""
    reader = _Reader(max_receipt)
    try:
        parser = MultipartParser(boundary_of(content_type), reader.callbacks())
        async for chunk in body:
            parser.write(chunk)
        parser.finalize()
    except FormParserError:
        raise _invalid("malformed multipart body") from None
    if not reader.ended:
        raise _invalid("the multipart body ends before its closing boundary")
    return reader.form
