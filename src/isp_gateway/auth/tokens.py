"""JWT issue and check with PyJWT: one pinned algorithm, `sub`, `iat` and `exp` required."""

from __future__ import annotations

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


def decode_token(settings: Settings, token: str) -> str:
    """The token's subject, or InvalidToken. Only the configured algorithm is accepted,
    which rules out `none` and algorithm-confusion tricks."""
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
    return subject
