"""Ping tasks and the result shapes the upstream was seen to return.

Outcome kinds:
- ``all_replies``: every ping answered.
- ``loss_10``: ping number 10, 20, … lost (10 % with 10 or 20 pings); with fewer than 10 pings
  the last one is lost instead (so 1 of 4 = 25 %: send 10 pings to see exactly 10 %).
- ``half_lost``: every even-numbered ping lost (floor(N/2) of N).
- ``none``: every ping a ``timeout``.
- ``unreachable``: every ping ``host unreachable``, and ``ping-exitoso`` wrongly says N of N.
- ``mixed_hosts``: entries alternate between the private and a public address, all answered.
- ``router_error``: every entry a router error text, ``ping-exitoso`` "0 de N".
- ``failure``: task status FAILURE, result an error string.
- ``malformed``: SUCCESS with a dict result; ``malformed_text``: SUCCESS with a string result.

Without an override, the kind comes from the service id: id % 20 == 7 → ``loss_10``,
id % 20 == 13 → ``half_lost``, id % 50 == 29 → ``none``, otherwise ``all_replies``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

PING_KINDS = (
    "all_replies",
    "loss_10",
    "half_lost",
    "none",
    "unreachable",
    "mixed_hosts",
    "router_error",
    "failure",
    "malformed",
    "malformed_text",
)


def default_kind(service_id: int) -> str:
    if service_id % 20 == 7:
        return "loss_10"
    if service_id % 20 == 13:
        return "half_lost"
    if service_id % 50 == 29:
        return "none"
    return "all_replies"


@dataclass
class PingTask:
    task_id: str
    service_id: int
    pings: int
    kind: str
    host: str
    interface: str
    started: float


def _rtt(rng: random.Random, public: bool) -> str:
    """A RouterOS-style round trip: "1ms287us" under 10 ms, "563ms" above."""
    micros = rng.randint(20_000, 600_000) if public else rng.randint(400, 9_000)
    millis, rest = divmod(micros, 1000)
    return f"{millis}ms{rest}us" if millis < 10 else f"{millis}ms"


def _reply(rng: random.Random, host: str, seq: int, public: bool = False) -> dict[str, str]:
    rtt = _rtt(rng, public)
    return {
        "seq": str(seq),
        "host": host,
        "size": "56",
        "ttl": "57" if public else "64",
        "time": rtt,
        "sent": "1",
        "received": "1",
        "packet-loss": "0",
        "min-rtt": rtt,
        "avg-rtt": rtt,
        "max-rtt": rtt,
    }


def no_reply(host: str, seq: int, status: str) -> dict[str, str]:
    return {
        "seq": str(seq),
        "host": host,
        "status": status,
        "sent": "1",
        "received": "0",
        "packet-loss": "100",
    }


def _lost(kind: str, number: int, total: int) -> bool:
    if kind == "half_lost":
        return number % 2 == 0
    if kind == "loss_10":
        return number % 10 == 0 or (total < 10 and number == total)
    return kind == "none"


def task_result(task: PingTask, seed: int) -> tuple[str, Any]:
    """The final (status, result) of a finished task; deterministic per task and seed."""
    kind, n, host = task.kind, task.pings, task.host
    if kind == "failure":
        return "FAILURE", f"Error al conectar con el router: timed out ({host})"
    if kind == "malformed":
        return "SUCCESS", {"error": "No fue posible ejecutar el ping", "host": host}
    if kind == "malformed_text":
        return "SUCCESS", "Ping encolado"
    rng = random.Random(f"{seed}:{task.task_id}")
    entries: list[dict[str, Any]] = []
    received = 0
    for number in range(1, n + 1):
        key = f"ping-{number}"
        if kind == "router_error":
            entries.append(
                {
                    key: (
                        '(\'Error "input does not match any value of interface" executing '
                        f"command /ping =address={host} =count=1 =interface={task.interface}')"
                    )
                }
            )
        elif kind == "unreachable":
            entries.append({key: no_reply(host, number - 1, "host unreachable")})
            # The upstream was seen counting these as successes.
            received += 1
        elif _lost(kind, number, n):
            entries.append({key: no_reply(host, number - 1, "timeout")})
        else:
            public = kind == "mixed_hosts" and number % 2 == 0
            target = (
                f"181.49.{task.service_id % 250}.{task.service_id // 250 % 250 + 1}"
                if public
                else host
            )
            entries.append({key: _reply(rng, target, number - 1, public)})
            received += 1
    entries.append({"ping-exitoso": f"{received} de {n}"})
    return "SUCCESS", entries
