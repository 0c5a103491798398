"""bcrypt hashing and checking, off the event loop (bcrypt is deliberately slow)."""

from __future__ import annotations

import functools

import anyio.to_thread
import bcrypt


def hash_password(password: str) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt()).decode()


def _cost(hashed: str) -> int:
    """The work factor of a `$2b$12$...` hash (12 when it cannot be read)."""
    parts = hashed.split("$")
    if len(parts) > 2 and parts[2].isdigit() and 4 <= int(parts[2]) <= 31:
        return int(parts[2])
    return 12


@functools.cache
def _dummy_for_cost(cost: int) -> str:
    return bcrypt.hashpw(b"not-a-real-password-timing-equaliser", bcrypt.gensalt(cost)).decode()


def dummy_hash(configured: str) -> str:
    """A hash to check unknown users against, so a login takes as long whether or not the
    user exists. Its cost must equal the configured hash's, or the time still tells."""
    return _dummy_for_cost(_cost(configured))


def _check(password: str, hashed: str) -> bool:
    try:
        return bcrypt.checkpw(password.encode(), hashed.encode())
    except ValueError:  # malformed hash, or a password over bcrypt's 72-byte limit
        return False


async def verify_password(password: str, hashed: str) -> bool:
    return await anyio.to_thread.run_sync(_check, password, hashed)
