"""Classification of every upstream result shape in UPSTREAM.md (pure functions, no I/O)."""

from __future__ import annotations

from typing import Any

import pytest

from isp_gateway.network.classify import classify
from isp_gateway.simulator.pings import no_reply
from isp_gateway.upstream.ping import parse_task

ROUTER_ERROR = (
    '(\'Error "input does not match any value of interface" executing command '
    "/ping =address=172.16.1.2 =count=1 =interface=ether9')"
)


def reply(seq: int, host: str = "172.16.12.60") -> dict[str, str]:
    return {
        "seq": str(seq),
        "host": host,
        "size": "56",
        "ttl": "64",
        "time": "1ms287us",
        "sent": "1",
        "received": "1",
        "packet-loss": "0",
        "min-rtt": "1ms287us",
        "avg-rtt": "1ms287us",
        "max-rtt": "1ms287us",
    }


def lost(seq: int, status: str = "timeout", host: str = "172.16.12.60") -> dict[str, str]:
    # The upstream's entry for a probe with no reply, as the simulator writes it.
    return no_reply(host, seq, status)


def result(entries: list[Any], exitoso: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{f"ping-{i + 1}": e} for i, e in enumerate(entries)]
    out.append({"ping-exitoso": exitoso})
    return out


def outcome(status: str, value: Any) -> tuple[str, int | None, int | None, float | None]:
    c = classify(parse_task(status, value))
    return c.action, c.sent, c.received, c.loss_percent


def test_all_replies_is_stable() -> None:
    entries = [reply(i) for i in range(4)]
    assert outcome("SUCCESS", result(entries, "4 de 4")) == ("stable_connection", 4, 4, 0.0)


def test_ten_percent_loss_is_stable() -> None:
    entries = [lost(i) if i == 9 else reply(i) for i in range(10)]
    assert outcome("SUCCESS", result(entries, "9 de 10")) == ("stable_connection", 10, 9, 10.0)


def test_twenty_percent_loss_is_still_stable_and_more_is_intermittent() -> None:
    five = [lost(0)] + [reply(i) for i in range(1, 5)]
    assert outcome("SUCCESS", result(five, "4 de 5")) == ("stable_connection", 5, 4, 20.0)
    four = [lost(0)] + [reply(i) for i in range(1, 4)]
    assert outcome("SUCCESS", result(four, "3 de 4")) == ("intermittent_connection", 4, 3, 25.0)


def test_half_lost_is_intermittent() -> None:
    entries = [lost(i) if i % 2 else reply(i) for i in range(6)]
    assert outcome("SUCCESS", result(entries, "3 de 6")) == ("intermittent_connection", 6, 3, 50.0)


def test_none_received_is_no_internet() -> None:
    entries = [lost(i) for i in range(4)]
    assert outcome("SUCCESS", result(entries, "0 de 4")) == ("no_internet", 4, 0, 100.0)


def test_host_unreachable_is_not_a_reply_whatever_ping_exitoso_says() -> None:
    entries = [lost(i, "host unreachable") for i in range(4)]
    # The upstream was seen claiming success for these; we count them ourselves.
    assert outcome("SUCCESS", result(entries, "4 de 4")) == ("no_internet", 4, 0, 100.0)


def test_host_unreachable_with_a_lying_received_counter() -> None:
    entry = {**lost(0, "host unreachable"), "received": "1"}
    assert outcome("SUCCESS", result([entry, reply(1)], "2 de 2"))[:3] == (
        "intermittent_connection",
        2,
        1,
    )


def test_mixed_private_and_public_hosts_count_every_entry() -> None:
    entries = [reply(i, "172.16.12.60" if i % 2 == 0 else "181.49.1.2") for i in range(4)]
    assert outcome("SUCCESS", result(entries, "4 de 4")) == ("stable_connection", 4, 4, 0.0)
    entries[1] = lost(1, host="181.49.1.2")
    entries[3] = lost(3, host="181.49.1.2")
    assert outcome("SUCCESS", result(entries, "2 de 4")) == ("intermittent_connection", 4, 2, 50.0)


def test_all_text_errors_is_ping_failed() -> None:
    entries = [ROUTER_ERROR] * 4
    assert outcome("SUCCESS", result(entries, "0 de 4")) == ("ping_failed", None, None, None)


def test_text_errors_do_not_count_as_sent() -> None:
    entries = [ROUTER_ERROR, reply(1), reply(2), ROUTER_ERROR]
    assert outcome("SUCCESS", result(entries, "2 de 4")) == ("stable_connection", 2, 2, 0.0)


def test_failure_status_is_ping_failed() -> None:
    assert outcome("FAILURE", "Error al conectar con el router: timed out") == (
        "ping_failed",
        None,
        None,
        None,
    )


@pytest.mark.parametrize(
    "value",
    [
        {"error": "No fue posible ejecutar el ping", "host": "172.16.1.2"},
        "Ping encolado",
        None,
        [],
        [{"ping-exitoso": "4 de 4"}],
        [{"ping-1": 42}, "junk"],
    ],
)
def test_malformed_success_is_ping_failed(value: Any) -> None:
    assert outcome("SUCCESS", value)[0] == "ping_failed"


@pytest.mark.parametrize("status", ["PENDING", "PROCESS", "STARTED", "process"])
def test_running_states(status: str) -> None:
    assert parse_task(status, None).state == "running"


def test_entries_are_read_in_ping_order_and_loss_is_rounded() -> None:
    entries = result([reply(0), lost(1), reply(2)], "2 de 3")
    entries.reverse()
    assert outcome("SUCCESS", entries) == ("intermittent_connection", 3, 2, 33.3)
