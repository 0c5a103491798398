"""System tools a test drives (nginx, chromium, redis-server): where they are, and the one
line a test is skipped with when one is missing."""

from __future__ import annotations

import shutil

import pytest


def tool_path(tool: str) -> str | None:
    """Where a system tool is: on PATH, or in the sbin directories (which a non-root PATH
    on Debian lacks; nginx lives there)."""
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/sbin")


def missing_tool(tool: str, package: str | None = None) -> str:
    """The one line a test without `tool` is skipped with: the Debian package to install."""
    return f"needs {tool} (apt-get install {package or tool}); .ci/run installs it"


def needs(tool: str, package: str | None = None) -> pytest.MarkDecorator:
    """Skip the test (a decorator, or a module's `pytestmark`) when the system tool it
    drives is missing, with one line naming the Debian package (`package`, else the tool's
    name). `.ci/run` installs them all, so CI runs every test; `-ra` lists the skips."""
    return pytest.mark.skipif(tool_path(tool) is None, reason=missing_tool(tool, package))


def tool_or_skip(tool: str, package: str | None = None) -> str:
    """The path of the system tool a helper drives, or the test is skipped with the same
    line as `needs` (for helpers a test reaches without the mark)."""
    found = tool_path(tool)
    if found is None:
        pytest.skip(missing_tool(tool, package))
    return found
