"""The files of deploy/ as shipped, rendered for a test run by plain text substitution of the
values they mark, and the system tools their tests drive (missing ones fail, naming the
Debian package)."""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
UNIT = "isp-gateway@.service"
# The unit's ExecStart binary where README's recipe installs it.
SHIPPED_BINARY = "/opt/isp-gateway/bin/isp-gateway"


def render(name: str, values: Mapping[str, str]) -> str:
    """deploy/`name` with each marked value replaced. Each must be there as written: a file
    that changed under the test fails here instead of being tested half-rendered."""
    text = (DEPLOY / name).read_text()
    for old, new in values.items():
        assert old in text, f"deploy/{name} no longer holds {old!r}"
        text = text.replace(old, new)
    return text


def require(tool: str, package: str) -> str:
    """The path of a system tool (also looked for in the sbin directories, which a
    non-root PATH on Debian lacks), or the test fails with one line naming its package."""
    found = shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")
    if found is None:
        pytest.fail(f"{tool} is missing: apt-get install {package}", pytrace=False)
    return found


def venv_binary() -> str:
    """This checkout's `isp-gateway` (next to the interpreter running the tests)."""
    binary = Path(sys.executable).parent / "isp-gateway"
    assert binary.is_file(), f"no {binary}: run `make install`"
    return str(binary)


def unit_exec_start() -> str:
    """The unit's ExecStart, running this checkout's `isp-gateway` instead of the installed one."""
    text = render(UNIT, {SHIPPED_BINARY: venv_binary()})
    (line,) = [line for line in text.splitlines() if line.startswith("ExecStart=")]
    return line.removeprefix("ExecStart=")


def unit_command(port: int) -> list[str]:
    """The command the unit runs for instance `port` (`isp-gateway@<port>`)."""
    return shlex.split(unit_exec_start().replace("%i", str(port)))
