"""Standard Webhooks signing (the `standardwebhooks` package signs; OUTAGES.md 2).

`webhook-id` is the notice's id, the same on every retry; `webhook-timestamp` the moment of
this attempt (a receiver refuses one more than five minutes off, so a retry is signed anew);
`webhook-signature` `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from standardwebhooks import Webhook

USER_AGENT = "isp-gateway-webhooks/1.0"


def signed_headers(secret: str, msg_id: str, body: str, now: float | None = None) -> dict[str, str]:
    moment = datetime.fromtimestamp(int(time.time() if now is None else now), UTC)
    return {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(moment.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, moment, body),
    }


def iso(moment: float) -> str:
    """A moment as the events write it: UTC, seconds, `Z`."""
    return datetime.fromtimestamp(moment, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def body_text(event_type: str, moment: float, data: dict[str, Any]) -> str:
    """The event as sent (and signed): `{"type", "timestamp", "data"}`, compact UTF-8 JSON."""
    payload = {"type": event_type, "timestamp": iso(moment), "data": data}
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
