"""Classification of a finished ping task (DECISIONS.md "Network"). Pure, no I/O."""

from __future__ import annotations

from dataclasses import dataclass

from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.upstream.ping import PingResult

STABLE = Action.STABLE_CONNECTION
INTERMITTENT = Action.INTERMITTENT_CONNECTION
NO_INTERNET = Action.NO_INTERNET
FAILED = Action.PING_FAILED

# Loss at or below this is a stable connection (DECISIONS.md).
STABLE_MAX_LOSS_PERCENT = 20.0

# Each outcome's message is the catalogue's "ping" variant of its action (kit/messages.py).
PING = "ping"


@dataclass(frozen=True)
class Classification:
    action: str
    sent: int | None = None
    received: int | None = None
    loss_percent: float | None = None

    @property
    def message(self) -> str:
        return messages.say(self.action, PING)


def classify(result: PingResult) -> Classification:
    """The outcome of a finished task, counting replies ourselves (never `ping-exitoso`)."""
    if result.state != "success" or not result.entries:
        # FAILURE, or a SUCCESS whose result is not a list of pings (malformed).
        return Classification(FAILED)
    probes = [entry for entry in result.entries if entry.error is None]
    sent = sum(entry.sent for entry in probes)
    if sent == 0:
        # Every entry a router error: nothing was measured.
        return Classification(FAILED)
    received = sum(entry.received for entry in probes)
    loss = 100.0 * (sent - received) / sent
    if received == 0:
        action = NO_INTERNET
    elif loss <= STABLE_MAX_LOSS_PERCENT:
        action = STABLE
    else:
        action = INTERMITTENT
    return Classification(action, sent, received, round(loss, 1))
