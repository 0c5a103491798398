"""Reading the settings: `load_settings()` builds them from the environment and `.env`, and
turns every problem into one short, secret-free message (ConfigurationError)."""

from __future__ import annotations

from difflib import get_close_matches
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

if TYPE_CHECKING:
    from isp_gateway.settings import Settings

# Variables the command line reads besides the settings: a `.env` may hold them too.
CLI_VARIABLES = frozenset({"SIMULATOR_API_KEY", "PROMETHEUS_MULTIPROC_DIR"})


class ConfigurationError(Exception):
    """Raised with a one-paragraph, secret-free description of what is wrong."""


def describe_validation_error(exc: ValidationError) -> str:
    """Name every offending variable in one short message, never echoing values."""
    problems: list[str] = []
    for err in exc.errors():
        name = ".".join(str(part) for part in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            problems.append(f"{name} is required but not set")
        else:
            # Checks across fields name their variable in the message themselves.
            problems.append(f"{name}: {msg}" if name else msg)
    return "invalid configuration: " + "; ".join(problems)


def unknown_env_file_keys(known: set[str], env_file: str | Path | None = ".env") -> list[str]:
    """The keys of `env_file` that are no setting (of `known`) and no variable the CLI
    reads, each with a hint when a setting's name is close (`CORS_ORIGIN` → `CORS_ORIGINS`)."""
    if env_file is None or not Path(env_file).is_file():
        return []
    from dotenv import dotenv_values  # pydantic-settings' own .env reader

    known = known | CLI_VARIABLES
    problems = []
    for key in dotenv_values(env_file, encoding="utf-8"):
        if key in known:
            continue
        close = get_close_matches(key, sorted(known), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        problems.append(f"{key} in {Path(env_file).name} is no setting{hint}")
    return problems


def load(settings_class: type[Settings], **overrides: Any) -> Settings:
    """The settings, or ConfigurationError naming every problem: invalid values and, in
    `.env`, keys that are no setting (a typo would otherwise be silently ignored)."""
    known = set(settings_class.model_fields)
    problems = unknown_env_file_keys(known, overrides.get("_env_file", ".env"))
    try:
        settings = settings_class(**overrides)
    except ValidationError as exc:
        message = describe_validation_error(exc)
        raise ConfigurationError("; ".join([message, *problems])) from None
    if problems:
        raise ConfigurationError("invalid configuration: " + "; ".join(problems))
    return settings
