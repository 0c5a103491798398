"""A report's body and its limits (MONEY.md 2 and 4), over raw sockets where it matters: a
receipt past RECEIPT_MAX_BYTES answers the gateway's own 413 with the rest of its body never
read (the test never sends it), a declared length past the route's cap before a byte is
read; a receipt far above MAX_BODY_BYTES passes on its route only; the receipt never
touches the disk; and a worker holds a bounded number of receipts at once."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from isp_gateway.auth.keys import generate_key, new_entry, write_key_entries
from isp_gateway.payments.slots import RECEIPTS_AT_ONCE, RECEIPTS_PER_CALLER
from tests.conftest import Gateway
from tests.payments.conftest import (
    DEBTORS,
    PROMISE,
    REPORT,
    StartMoney,
    audit_events,
    pdf_file,
    report,
    report_fields,
    sim_reports,
    statement_of,
    verification_id,
)
from tests.support import wait_until

BOUNDARY = "b0undary5c1a7e"
REPORTER = ["clients:verify", "payments:report"]
PDF_RECEIPT = ("r.pdf", pdf_file(), "application/pdf")
SMALL_CAP = 64 * 1024


def form_head(fields: dict[str, str]) -> bytes:
    parts = b"".join(
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    )
    return (
        parts
        + (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="receipt"; '
            'filename="r.pdf"\r\nContent-Type: application/pdf\r\n\r\n'
        ).encode()
    )


TAIL = f"\r\n--{BOUNDARY}--\r\n".encode()


def receipt_of(size: int) -> bytes:
    """A PDF's first bytes, padded to `size`."""
    head = b"%PDF-1.4\n"
    return head + b"0" * (size - len(head))


@contextlib.contextmanager
def connection(gw: Gateway) -> Iterator[socket.socket]:
    parts = urlsplit(gw.url)
    with socket.create_connection((parts.hostname or "", parts.port or 80), timeout=10) as sock:
        yield sock


def request_head(
    gw: Gateway, service_id: int, vid: str, length: int | None, auth: str | None = None
) -> bytes:
    """A report's request line and headers; `auth`, the credential's header line (default:
    the gateway's JWT)."""
    lines = [
        f"POST {REPORT.format(service_id)} HTTP/1.1",
        f"Host: {urlsplit(gw.url).netloc}",
        auth or f"Authorization: Bearer {gw.token}",
        f"X-Verification-Id: {vid}",
        f"Content-Type: multipart/form-data; boundary={BOUNDARY}",
    ]
    lines.append(
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    )
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_answer(sock: socket.socket) -> tuple[int, bytes]:
    """The status and everything the server sent until it closed the connection."""
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    status = int(data.split(b" ", 2)[1]) if data else 0
    return status, data


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_a_receipt_past_the_cap_is_refused_before_its_end(
    start_money: StartMoney, framing: str
) -> None:
    sim, gw = start_money(RECEIPT_MAX_BYTES=SMALL_CAP)
    sid = DEBTORS[0]
    vid = verification_id(gw, sid)
    head = form_head(report_fields())
    receipt = receipt_of(SMALL_CAP + 20_000)
    body = head + receipt + TAIL
    # Within the route's cap (RECEIPT_MAX_BYTES + MAX_BODY_BYTES): the route's own check.
    assert len(body) < SMALL_CAP + 65536
    sent_upto = len(head) + SMALL_CAP + 8192  # past the cap, well before the end
    with connection(gw) as sock:
        sock.sendall(request_head(gw, sid, vid, len(body) if framing == "length" else None))
        payload = body[:sent_upto]
        if framing == "chunked":
            payload = b"".join(
                b"%x\r\n%s\r\n" % (len(piece), piece)
                for piece in (payload[i : i + 4096] for i in range(0, len(payload), 4096))
            )
        sock.sendall(payload)
        # The rest is never sent: the answer must come without it, and the server close.
        status, answer = read_answer(sock)
    assert status == 413, answer[:300]
    assert b'"action":"payload_too_large"' in answer
    assert f"El comprobante supera {SMALL_CAP} bytes".encode() in answer
    assert b"connection: close" in answer.lower()
    assert sim_reports(sim) == []


def test_a_declared_length_past_the_route_cap_is_refused_unread(start_money: StartMoney) -> None:
    sim, gw = start_money(RECEIPT_MAX_BYTES=SMALL_CAP)
    sid = DEBTORS[1]
    vid = verification_id(gw, sid)
    with connection(gw) as sock:
        # Headers only: not a byte of the 10 MB announced.
        sock.sendall(request_head(gw, sid, vid, 10_000_000))
        status, answer = read_answer(sock)
    assert status == 413
    assert f"El cuerpo de la solicitud supera {SMALL_CAP + 65536} bytes".encode() in answer
    assert sim_reports(sim) == []


def test_a_text_file_is_refused_on_its_first_bytes(start_money: StartMoney) -> None:
    sim, gw = start_money()
    sid = DEBTORS[2]
    vid = verification_id(gw, sid)
    text = b"plain text, not an image " * 40_000  # 1 MB announced
    head = form_head(report_fields())
    body = head + text + TAIL
    with connection(gw) as sock:
        sock.sendall(request_head(gw, sid, vid, len(body)))
        sock.sendall(body[: len(head) + 4096])  # the first 4 KiB of the file only
        status, answer = read_answer(sock)
    assert status == 415 and b'"action":"unsupported_receipt"' in answer
    assert sim_reports(sim) == []


def test_a_receipt_above_the_body_limit_passes_on_its_route_only(
    start_money: StartMoney, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim, gw = start_money(MAX_BODY_BYTES=65536)
    # Every temporary file the gateway makes is seen: Starlette's form parser would spool a
    # receipt over 1 MB to one (unnamed on Linux, so watched by its maker rather than in its
    # directory; a named one would land in a directory of the test's own).
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))
    made: list[str] = []
    loop = gw.runtime.services.clients.cache._periodic.get_loop()
    for maker in ("TemporaryFile", "NamedTemporaryFile", "mkstemp", "mkdtemp"):
        monkeypatch.setattr(tempfile, maker, watched(getattr(tempfile, maker), loop, made))
    sid = DEBTORS[3]
    vid = verification_id(gw, sid)
    big = pdf_file() + b"%" + b"9" * 1_600_000 + b"\n"  # 1.6 MB, a comment line of a PDF
    answer = report(gw, sid, vid, ("big.pdf", big, "application/pdf"))
    assert answer.status_code == 202, answer.text
    [filed] = sim_reports(sim)
    assert filed.content == big
    assert made == [] and list(spool.iterdir()) == []  # never written to disk
    # Every other route keeps MAX_BODY_BYTES.
    refused = gw.post(
        PROMISE.format(sid),
        content=b'{"until": "' + b"9" * 70_000 + b'"}',
        headers={"Content-Type": "application/json", "X-Verification-Id": vid},
    )
    assert (refused.status_code, refused.json()["action"]) == (413, "payload_too_large")


def watched(
    maker: Callable[..., Any], loop: asyncio.AbstractEventLoop, made: list[str]
) -> Callable[..., Any]:
    """`maker`, noting each call the gateway makes: on its loop, or in a worker thread of
    its loop (the simulator, in this process too, spools the uploads it receives: that is
    its own business as the backend)."""

    def make(*args: Any, **kwargs: Any) -> Any:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = getattr(threading.current_thread(), "loop", None)
        if running is loop:
            made.append(getattr(maker, "__name__", "a temporary file"))
        return maker(*args, **kwargs)

    return make


def keyed(
    start_money: StartMoney, tmp_path: Path, names: list[str], **settings: Any
) -> tuple[Gateway, dict[str, str]]:
    """A gateway with an API key per name (scopes to verify and report), and the keys."""
    keys = {name: generate_key() for name in names}
    path = tmp_path / "keys.json"
    entries = [new_entry(key, name, REPORTER, None) for name, key in keys.items()]
    write_key_entries(path, entries)
    _sim, gw = start_money(API_KEYS_FILE=str(path), **settings)
    return gw, keys


def key_verification(gw: Gateway, service_id: int, key: str, end_user: str | None = None) -> str:
    headers = {"X-API-Key": key, **({"X-End-User-Id": end_user} if end_user else {})}
    answer = gw.client.post(
        f"/api/v1/clients/{service_id}/verify", json=statement_of(service_id), headers=headers
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["data"]["verification_id"])


def stall(
    stack: contextlib.ExitStack, gw: Gateway, service_id: int, vid: str, auth: str | None = None
) -> socket.socket:
    """An upload that sends its head and part of its receipt, then nothing more."""
    head = form_head(report_fields())
    body = head + receipt_of(200_000) + TAIL
    sock = stack.enter_context(connection(gw))
    sock.sendall(request_head(gw, service_id, vid, len(body), auth) + body[: len(head) + 50_000])
    return sock


def held(gw: Gateway) -> int:
    """The receipts the gateway holds now."""
    slots: int = gw.runtime.services.payments.receipts.held
    return slots


def assert_busy(answer: Any) -> None:
    assert answer.status_code == 503, answer.text
    body = answer.json()
    assert (body["action"], body["meta"]) == ("payment_report_failed", {"reason": "receipts_busy"})
    assert answer.headers["Retry-After"] == "2"


def refused_at_once(sock: socket.socket) -> None:
    """The answer to an upload refused before its body is read: 503 `receipts_busy`."""
    status, answer = read_answer_first_line(sock)
    assert status == 503 and b'"reason":"receipts_busy"' in answer, answer[:300]


def test_a_worker_holds_a_bounded_number_of_receipts(
    start_money: StartMoney, tmp_path: Path
) -> None:
    gw, keys = keyed(start_money, tmp_path, ["second", "third"])
    sid = DEBTORS[4]
    vid = verification_id(gw, sid)
    second = key_verification(gw, sid, keys["second"])
    third = key_verification(gw, sid, keys["third"])
    with contextlib.ExitStack() as stack:
        # Two callers, each with its part of the slots, every upload stalled halfway
        # through its receipt: the worker's RECEIPTS_AT_ONCE are all taken.
        stalled = []
        for n in range(RECEIPTS_AT_ONCE):
            if n < RECEIPTS_PER_CALLER:
                stalled.append(stall(stack, gw, sid, vid))
            else:
                stalled.append(stall(stack, gw, sid, second, f"X-API-Key: {keys['second']}"))
            wait_until(lambda n=n: held(gw) == n + 1, message=f"upload {n + 1} read")
        # A third caller, within its own part, still finds the worker full.
        as_third = {"X-API-Key": keys["third"]}
        assert_busy(report(gw, sid, third, PDF_RECEIPT, headers=as_third))
        # One finishes: its slot is free again.
        first = stalled[0]
        first.sendall(receipt_of(200_000)[50_000:] + TAIL)
        status, _ = read_answer_first_line(first)
        assert status == 202
        wait_until(lambda: held(gw) == RECEIPTS_AT_ONCE - 1, message="its slot freed")
        filed = report(gw, sid, third, PDF_RECEIPT, reference="T2", headers=as_third)
        assert filed.status_code == 202, filed.text


def test_a_stalled_uploader_cannot_keep_another_key_from_reporting(
    start_money: StartMoney, tmp_path: Path
) -> None:
    """CALLERS.md 6, limits no key can escape: a key that opens every slot's worth of
    uploads and stalls them holds its part only; the other key is served meanwhile."""
    gw, keys = keyed(start_money, tmp_path, ["attacker", "bot"])
    own, customer = DEBTORS[5], DEBTORS[6]
    attacker = {"X-API-Key": keys["attacker"]}
    stalling = key_verification(gw, own, keys["attacker"])
    vid = key_verification(gw, customer, keys["bot"])
    with contextlib.ExitStack() as stack:
        for n in range(RECEIPTS_AT_ONCE):
            sock = stall(stack, gw, own, stalling, f"X-API-Key: {keys['attacker']}")
            if n < RECEIPTS_PER_CALLER:
                wait_until(lambda n=n: held(gw) == n + 1, message=f"upload {n + 1} read")
            else:
                refused_at_once(sock)  # past its part: refused, its body never read
        assert held(gw) == RECEIPTS_PER_CALLER
        assert_busy(report(gw, own, stalling, PDF_RECEIPT, reference="A2", headers=attacker))
        # Another end user of the same key is the same caller.
        other = key_verification(gw, own, keys["attacker"], end_user="someone-else")
        as_other = {**attacker, "X-End-User-Id": "someone-else"}
        assert_busy(report(gw, own, other, PDF_RECEIPT, reference="A3", headers=as_other))
        # The other key files its customer's report while the stalled uploads still hold.
        for n in range(RECEIPTS_PER_CALLER):
            filed = report(
                gw,
                customer,
                vid,
                PDF_RECEIPT,
                reference=f"B-{n}",
                headers={"X-API-Key": keys["bot"]},
            )
            assert filed.status_code == 202, filed.text
        assert held(gw) == RECEIPTS_PER_CALLER


def read_answer_first_line(sock: socket.socket) -> tuple[int, bytes]:
    data = sock.recv(65536)
    return int(data.split(b" ", 2)[1]), data


def test_a_stalled_upload_is_cut_at_the_deadline_and_its_slot_comes_back(
    start_money: StartMoney,
) -> None:
    sim, gw = start_money(RECEIPT_UPLOAD_TIMEOUT_SECONDS=1)
    sid = DEBTORS[7]
    vid = verification_id(gw, sid)
    with contextlib.ExitStack() as stack:
        stalled = []
        for n in range(RECEIPTS_PER_CALLER):
            stalled.append(stall(stack, gw, sid, vid))
            wait_until(lambda n=n: held(gw) == n + 1, message=f"upload {n + 1} read")
        started = time.monotonic()
        # The caller's part is taken while they stall...
        assert_busy(report(gw, sid, vid, PDF_RECEIPT, reference="T1"))
        # ... until the deadline: each is answered, the rest of its body never read.
        for sock in stalled:
            status, answer = read_answer(sock)
            assert status == 408, answer[:300]
            assert b'"action":"upload_timeout"' in answer
            assert b"connection: close" in answer.lower()
        assert time.monotonic() - started >= 0.5  # cut by the deadline, not at once
    wait_until(lambda: held(gw) == 0, message="every slot freed")
    filed = report(gw, sid, vid, PDF_RECEIPT, reference="T2")
    assert filed.status_code == 202, filed.text
    assert [r.reference for r in sim_reports(sim)] == ["T2"]
    cut = [
        e
        for e in audit_events(gw, "payment_report")
        if e["details"].get("reason") == "upload_timeout"
    ]
    assert {e["outcome"] for e in cut} == {"failed"}
    assert sum(e["details"]["count"] for e in cut) == RECEIPTS_PER_CALLER


def test_a_slow_upload_still_gives_the_backend_its_whole_time(start_money: StartMoney) -> None:
    """The request's deadline (UPSTREAM_TIMEOUT_SECONDS) counts from the body's last byte on
    this route: the customer's slow connection does not eat the backend's time."""
    sim, gw = start_money(UPSTREAM_TIMEOUT_SECONDS=2)
    sim.state.faults.update({"latency": [1.5, 1.5], "path_prefix": "/api/facturas/reportar-pago/"})
    sid = DEBTORS[8]
    vid = verification_id(gw, sid)
    head = form_head(report_fields())
    body = head + receipt_of(100_000) + TAIL
    with connection(gw) as sock:
        sock.sendall(request_head(gw, sid, vid, len(body)) + body[: len(head) + 50_000])
        time.sleep(3)  # longer than the whole deadline, well within the upload's
        sock.sendall(body[len(head) + 50_000 :])
        status, answer = read_answer_first_line(sock)
    assert status == 202, answer[:400]
    assert len(sim_reports(sim)) == 1
