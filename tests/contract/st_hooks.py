"""Schemathesis hooks for tests/contract/test_schemathesis.py (loaded via SCHEMATHESIS_HOOKS).

Only one: every generated ticket request carries its own Idempotency-Key. The fuzzer draws
header values from a tiny space and so sends one key with several bodies, which the service
rightly answers 422 `idempotency_key_reused` (DECISIONS.md); that is a state conflict the
idempotency tests cover, not a schema-valid request refused for its shape. A key that is
itself invalid (over 255 characters) is kept, so its 422 is still checked.
"""

from __future__ import annotations

import uuid
from typing import Any

import schemathesis

KEY = "Idempotency-Key"
MAX_KEY_LENGTH = 255


@schemathesis.hook
def before_call(ctx: Any, case: Any, **kwargs: Any) -> None:
    key = (case.headers or {}).get(KEY)
    if isinstance(key, str) and len(key) <= MAX_KEY_LENGTH:
        case.headers[KEY] = uuid.uuid4().hex
