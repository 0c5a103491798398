"""Where an http:// webhook may go (OUTAGES.md 1, WEBHOOKS_ALLOW_HTTP=true): loopback and the
private networks only, written out; never link-local (a cloud's metadata service at
169.254.169.254), multicast, broadcast, reserved, documentation or CGNAT addresses, an
IPv4-mapped IPv6 address judged by the address it maps. Checked when a subscription is added,
when the service loads the file, and before each attempt (a name that resolves there)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from isp_gateway.cli import main
from isp_gateway.notices import subscriptions as subs
from tests.conftest import Simulator, StartGateway
from tests.outages.conftest import Bot, Hooks, notice_settings, raise_outage, watching
from tests.support import wait_until

ALLOWED = [
    "http://127.0.0.1:5678/hook",
    "http://127.8.9.10/",
    "http://[::1]:5678/",
    "http://10.1.2.3/hook",
    "http://172.16.0.1/",
    "http://172.31.255.254/",
    "http://192.168.1.20/",
    "http://[fd12:3456::1]/",
    "http://[::ffff:10.0.0.1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://localhost:5678/hook",
]
REFUSED = [
    "http://169.254.169.254/latest/meta-data/",  # link-local: cloud metadata
    "http://[::ffff:169.254.169.254]/",  # the same, IPv4-mapped
    "http://[fe80::1]/",  # IPv6 link-local
    "http://255.255.255.255/",  # broadcast
    "http://240.0.0.1/",  # reserved
    "http://[2001:db8::1]/",  # documentation
    "http://192.0.2.10/",  # documentation
    "http://198.18.0.1/",  # benchmarking
    "http://100.64.0.1/",  # CGNAT
    "http://0.0.0.0/",  # unspecified
    "http://[::]/",  # unspecified
    "http://224.0.0.1/",  # multicast
    "http://[ff02::1]/",  # multicast
    "http://172.32.0.1/",  # just past 172.16/12
    "http://8.8.8.8/",  # public
    "http://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
]
# Names to the URL parser, addresses to the resolver: 169.254.169.254 written as one number
# and in hex. Only the check of what a name resolves to can refuse them.
RESOLVING_TO_METADATA = ["http://2852039166/", "http://0xa9.0xfe.0xa9.0xfe/"]


@pytest.fixture
def hooks_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # no stray .env
    path = tmp_path / "webhooks.json"
    monkeypatch.setenv("WEBHOOKS_FILE", str(path))
    monkeypatch.setenv("WEBHOOKS_ALLOW_HTTP", "true")
    return path


@pytest.mark.parametrize("url", ALLOWED)
def test_http_to_loopback_or_private_is_added(hooks_file: Path, url: str) -> None:
    assert subs.url_problem(url, True) is None
    assert subs.http_addresses_problem(url) is None
    assert main(["webhooks", "add", "bot", url]) == 0


@pytest.mark.parametrize("url", REFUSED + RESOLVING_TO_METADATA)
def test_http_anywhere_else_is_refused_when_added(
    hooks_file: Path, url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["webhooks", "add", "bot", url]) == 2
    assert "loopback or private" in capsys.readouterr().err
    assert not hooks_file.exists() or subs.entries(hooks_file.read_text(), hooks_file) == []
    # Before each attempt too, whatever the file says.
    assert subs.http_addresses_problem(url) is not None


@pytest.mark.parametrize("url", REFUSED)
def test_the_running_service_skips_them_in_the_file(
    tmp_path: Path, url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An entry written by hand (or by an older version) is skipped with an ERROR line."""
    path = tmp_path / "webhooks.json"
    subs.add(path, subs.new_entry("local", "http://127.0.0.1:9000/", ["outage.started"]))
    subs.add(path, subs.new_entry("odd", url, ["outage.started"]))
    assert subs.url_problem(url, True) is not None
    with caplog.at_level(logging.ERROR, logger="isp_gateway.notices"):
        loaded = subs.SubscriptionFile(path, allow_http=True).current()
    assert [s.name for s in loaded] == ["local"]
    assert any("webhook odd" in r.getMessage() for r in caplog.records)


def test_a_name_resolving_to_link_local_is_never_sent_to(
    sim: Simulator,
    start_gateway: StartGateway,
    bot: Bot,
    hooks: Hooks,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The service loads a URL whose host is a name (it cannot resolve names while reading
    the file); each attempt resolves it first and refuses 169.254.169.254, sending nothing,
    while the other receiver gets its notice."""
    receiver, _ = bot
    hooks.add("metadata", RESOLVING_TO_METADATA[0])
    gw = watching(start_gateway(sim.url, **notice_settings(hooks)))
    loaded = gw.runtime.services.outages.detector.notices.subscriptions.current()
    assert [s.name for s in loaded] == ["bot", "metadata"]
    with caplog.at_level(logging.WARNING, logger="isp_gateway.notices"):
        raise_outage(sim, 7, "Corte")
        receiver.wait("outage.started")

        def refused() -> bool:
            return any(
                "webhook metadata" in r.getMessage()
                and "other than loopback or private" in r.getMessage()
                for r in caplog.records
            )

        wait_until(refused, timeout=15)
