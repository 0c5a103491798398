"""JWT issue and check with PyJWT: one pinned algorithm, `sub`, `iat` and `exp` required."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import jwt

from isp_gateway.settings import Settings


class InvalidToken(Exception):
    pass


def issue_token(settings: Settings, subject: str, *, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    claims = {
        "sub": subject,
        "iat": int(now.timestamp()),
        "exp": int((now + timedelta(minutes=settings.JWT_ACCESS_TOKEN_EXPIRE_MINUTES)).timestamp()),
    }
    return jwt.encode(
        claims, settings.JWT_SECRET_KEY.get_secret_value(), algorithm=settings.JWT_ALGORITHM
    )


class TokenCache:
    """Tokens already verified, with their expiry, so the hot path skips the HMAC and JSON
    work on every request of a bot that reuses one token. Bounded; checked for expiry on
    every use. Keyed by the whole token, so a tampered token is never a hit."""

    def __init__(self, max_size: int = 1024) -> None:
        self._max = max_size
        self._tokens: dict[str, tuple[str, float]] = {}

    def get(self, token: str) -> str | None:
        hit = self._tokens.get(token)
        if hit is None:
            return None
        if hit[1] <= time.time():
            self._tokens.pop(token, None)
            return None
        return hit[0]

    def put(self, token: str, subject: str, expires: float) -> None:
        if len(self._tokens) >= self._max:
            self._tokens.clear()  # crude but bounded; a bot re-verifies once
        self._tokens[token] = (subject, expires)


def shaped(token: str) -> bool:
    """Whether the value has a JWT's shape, three dot-separated parts: one that has not is
    refused before the JWT library's own parse (CALLERS.md 6: a bad token costs no more
    than a cached lookup)."""
    return token.count(".") == 2


def verify_token(settings: Settings, token: str, cache: TokenCache) -> str:
    """The token's subject (checked by `_decode`), with a cache of verified tokens."""
    subject = cache.get(token)
    if subject is not None:
        return subject
    subject, expires = _decode(settings, token)
    cache.put(token, subject, expires)
    return subject


def _decode(settings: Settings, token: str) -> tuple[str, float]:
    """The token's subject, or InvalidToken. Only the configured algorithm is accepted,
    which rules out `none` and algorithm-confusion tricks; a value not `shaped` is refused
    first."""
    if not shaped(token):
        raise InvalidToken("DecodeError")
    try:
        claims = jwt.decode(
            token,
            settings.JWT_SECRET_KEY.get_secret_value(),
            algorithms=[settings.JWT_ALGORITHM],
            options={"require": ["sub", "exp"]},
        )
    except jwt.PyJWTError as exc:
        raise InvalidToken(type(exc).__name__) from None
    subject = claims.get("sub")
    if not isinstance(subject, str) or subject != settings.API_USERNAME:
        raise InvalidToken("unknown subject")
    return subject, float(claims["exp"])
