"""`isp-gateway webhooks` (OUTAGES.md 1): the subscriptions file under its lock, the secret
printed once, the URL rules, and `webhooks test` printing the receiver's answer."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from isp_gateway.cli import main
from isp_gateway.notices import subscriptions as subs
from isp_gateway.notices.signing import body_text, signed_headers
from tests.outages.conftest import StartReceiver, verified
from tests.support import default_sigint, free_port

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "webhook_receiver.py"


@pytest.fixture
def hooks_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no stray .env
    path = tmp_path / "webhooks.json"
    monkeypatch.setenv("WEBHOOKS_FILE", str(path))
    monkeypatch.delenv("WEBHOOKS_ALLOW_HTTP", raising=False)
    return path


def test_add_prints_the_secret_once_and_keeps_the_file_private(
    hooks_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["webhooks", "add", "n8n", "https://bots.example.com/hook"]) == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("whsec_")
    assert stat.S_IMODE(hooks_file.stat().st_mode) == 0o600
    [entry] = subs.entries(hooks_file.read_text(), hooks_file)
    assert entry["secret"] == out and entry["events"] == list(subs.EVENT_TYPES)
    assert main(["webhooks", "list"]) == 0
    listed = capsys.readouterr().out
    assert "n8n" in listed and "https://bots.example.com/hook" in listed and out not in listed
    assert main(["webhooks", "add", "n8n", "https://other.example.com/"]) == 2  # name taken
    assert main(["webhooks", "remove", "n8n"]) == 0
    assert main(["webhooks", "remove", "n8n"]) == 2
    assert subs.entries(hooks_file.read_text(), hooks_file) == []


@pytest.mark.parametrize(
    ("url", "allow_http", "accepted"),
    [
        ("https://bots.example.com/hook", False, True),
        ("http://127.0.0.1:5678/hook", False, False),
        ("http://127.0.0.1:5678/hook", True, True),
        ("http://10.1.2.3/hook", True, True),
        ("http://localhost:5678/hook", True, True),
        ("http://8.8.8.8/hook", True, False),
        ("ftp://bots.example.com/", True, False),
        ("https://user:pw@bots.example.com/", False, False),
        ("not a url", True, False),
    ],
)
def test_https_only_unless_allowed_and_then_to_private_addresses(
    hooks_file: Path, monkeypatch: pytest.MonkeyPatch, url: str, allow_http: bool, accepted: bool
) -> None:
    monkeypatch.setenv("WEBHOOKS_ALLOW_HTTP", str(allow_http).lower())
    assert (main(["webhooks", "add", "bot", url]) == 0) is accepted
    assert (subs.url_problem(url, allow_http) is None) is accepted


def test_the_running_service_skips_an_http_receiver_it_may_not_use(tmp_path: Path) -> None:
    path = tmp_path / "webhooks.json"
    subs.add(path, subs.new_entry("local", "http://127.0.0.1:9000/", ["outage.started"]))
    subs.add(path, subs.new_entry("remote", "https://bots.example.com/", ["outage.ended"]))
    assert [s.name for s in subs.SubscriptionFile(path, allow_http=False).current()] == ["remote"]
    both = subs.SubscriptionFile(path, allow_http=True).current()
    assert [s.name for s in both] == ["local", "remote"]


def test_adds_at_once_are_all_kept(hooks_file: Path) -> None:
    """Twenty adds at once (the file's lock): none lost, the file whole."""

    def add(n: int) -> None:
        subs.add(
            hooks_file, subs.new_entry(f"bot-{n}", f"https://b{n}.example.com/", ["outage.started"])
        )

    with ThreadPoolExecutor(20) as pool:
        list(pool.map(add, range(20)))
    names = {e["name"] for e in subs.entries(hooks_file.read_text(), hooks_file)}
    assert names == {f"bot-{n}" for n in range(20)}
    assert [p.name for p in hooks_file.parent.iterdir() if p.name.endswith(".tmp")] == []


def test_webhooks_test_prints_the_receivers_answer(
    hooks_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    start_receiver: StartReceiver,
) -> None:
    monkeypatch.setenv("WEBHOOKS_ALLOW_HTTP", "true")
    receiver = start_receiver()
    assert main(["webhooks", "add", "bot", receiver.url]) == 0
    secret = capsys.readouterr().out.strip()
    receiver.answers = [202]
    assert main(["webhooks", "test", "bot"]) == 0
    out = capsys.readouterr().out
    assert "HTTP 202 Accepted" in out
    [sent] = receiver.of("webhook.test")
    event = verified(sent, secret)
    assert event["data"]["webhook"] == "bot" and event["data"]["message"]
    receiver.answers = [500]
    assert main(["webhooks", "test", "bot"]) == 1
    assert "HTTP 500 Internal Server Error" in capsys.readouterr().out


@pytest.mark.parametrize(
    "command",
    [
        ["-m", "isp_gateway", "webhooks", "receive", "--port", "{port}", "--secret", "{secret}"],
        [str(EXAMPLE)],
    ],
    ids=["webhooks-receive", "example"],
)
def test_the_receivers_print_a_verified_notice_and_refuse_a_forged_one(
    command: list[str], tmp_path: Path
) -> None:
    secret = subs.new_secret()
    port = free_port()
    args = [a.format(port=port, secret=secret) for a in command]
    env = {**os.environ, "WEBHOOK_SECRET": secret, "PORT": str(port)}
    proc = subprocess.Popen(
        [sys.executable, *args],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    try:
        url = f"http://127.0.0.1:{port}/hook"
        data = {"outage_id": "r7-1", "message": "Hay una falla general en su sector."}
        body = body_text("outage.started", time.time(), data)
        deadline = time.monotonic() + 15
        while True:
            try:
                good = httpx.post(url, content=body, headers=signed_headers(secret, "msg_a", body))
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, "the receiver never listened"
                time.sleep(0.1)
        assert good.status_code == 204
        forged = signed_headers(subs.new_secret(), "msg_b", body)
        assert httpx.post(url, content=body, headers=forged).status_code == 401
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            out, _ = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()  # not left running for the next test to find
            proc.communicate()
            raise
    assert "msg_a" in out and "Hay una falla general en su sector." in out
    assert "msg_b" not in out


def test_a_broken_file_keeps_the_last_good_subscriptions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "webhooks.json"
    subs.add(path, subs.new_entry("bot", "https://bots.example.com/", ["outage.started"]))
    ring = subs.SubscriptionFile(path, allow_http=False, check_interval=0)
    assert [s.name for s in ring.current()] == ["bot"]
    path.write_text('{"webhooks": [{"name": "half')
    assert [s.name for s in ring.current()] == ["bot"]
    assert any("not valid JSON" in r.getMessage() for r in caplog.records)
    secret = ring.current()[0].secret
    assert all(secret not in r.getMessage() for r in caplog.records)
    path.unlink()
    assert ring.current() == []  # the file removed: notices to nobody


def test_the_command_says_what_is_missing(
    hooks_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["webhooks", "test", "nobody"]) == 2
    assert "no webhook named 'nobody'" in capsys.readouterr().err
    assert main(["webhooks", "add", "bad name", "https://bots.example.com/"]) == 2
    assert main(["webhooks", "add", "bot", "https://b.example.com/", "--events", "x"]) == 2
    assert "unknown event x" in capsys.readouterr().err
    monkeypatch.setenv("WEBHOOKS_FILE", "")
    assert main(["webhooks", "list"]) == 2
    assert "WEBHOOKS_FILE is not set" in capsys.readouterr().err


def _ignoring_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_the_receiver_stops_on_a_signal_whatever_it_inherited(
    stop: signal.Signals, tmp_path: Path
) -> None:
    # Born ignoring SIGINT, as a child of a script's `&` or of a pytest-xdist worker is:
    # `demo` stops it with SIGINT, and waited 10 s for it before killing it.
    port = free_port()
    args = ["-m", "isp_gateway", "webhooks", "receive", "--port", str(port)]
    proc = subprocess.Popen(
        [sys.executable, *args, "--secret", subs.new_secret()],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignoring_sigint,
    )
    try:
        assert proc.stderr is not None
        assert "receiving webhooks" in proc.stderr.readline()  # it listens
        proc.send_signal(stop)
        proc.communicate(timeout=5)
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()  # not left running for the next test to find
        proc.communicate()
