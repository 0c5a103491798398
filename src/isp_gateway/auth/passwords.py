"""bcrypt hashing and checking, off the event loop (bcrypt is deliberately slow)."""

from __future__ import annotations

import functools

import anyio.to_thread
import bcrypt


def hash_password(password: str) -> str:
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt()).decode()


@functools.cache
def dummy_hash() -> str:
    # Checked for unknown users so a login takes as long whether or not the user exists.
    return hash_password("not-a-real-password-timing-equaliser")


def _check(password: str, hashed: str) -> bool:
    try:
        return bcrypt.checkpw(password.encode(), hashed.encode())
    except ValueError:  # malformed hash, or a password over bcrypt's 72-byte limit
        return False


async def verify_password(password: str, hashed: str) -> bool:
    return await anyio.to_thread.run_sync(_check, password, hashed)
