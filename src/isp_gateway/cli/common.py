"""What every command shares: exit codes, logging, settings or a one-line exit."""

from __future__ import annotations

import sys
from typing import Any

EXIT_CONFIG = 2


def configure_logging(level: str, fmt: str = "text") -> None:
    from isp_gateway.web.logs import configure_logging

    configure_logging(level, fmt)


def load_settings_or_exit(**overrides: Any) -> Any:
    from isp_gateway.settings import ConfigurationError, load_settings

    try:
        return load_settings(**overrides)
    except ConfigurationError as exc:
        print(f"isp-gateway: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None
