"""Issue 17, logs and edges (CALLERS.md 2): a path never forges a log line, a path no route
knows is logged with its long digit runs masked, and no answer is a redirect built from the
`Host` header. Read from the real output of `isp-gateway serve`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx

from isp_gateway.web.logs import escape_control, mask_unknown_path
from tests.conftest import required_env
from tests.support import base_env, serving
from tests.web.test_logs import TEXT_LINE

FORGED = "2026-01-01 00:00:00,000 INFO isp_gateway: admin logged in"
DOCUMENT = "1098765432"


def served_output(password_hash: str, tmp_path: Path, **env: str) -> str:
    """Start `serve`, send the hostile requests, stop it; everything it wrote."""
    with (
        serving(base_env(**required_env(password_hash), **env), tmp_path) as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        for path in (
            "/nothing%0A" + FORGED.replace(" ", "%20"),
            "/nothing%0D%0A" + FORGED.replace(" ", "%20"),
            "/nothing%E2%80%A8" + FORGED.replace(" ", "%20"),
            f"/api/v1/clients/by-documento/{DOCUMENT}",
            f"/api/v1/unknown/{DOCUMENT}/x{DOCUMENT}y",
        ):
            assert client.get(path).status_code == 404
    return served.output


def test_text_log_lines_cannot_be_forged_and_unknown_paths_are_masked(
    password_hash: str, tmp_path: Path
) -> None:
    output = served_output(password_hash, tmp_path)
    lines = output.splitlines()
    assert all(TEXT_LINE.match(line) for line in lines), lines
    assert not any(line.startswith(FORGED) for line in lines)
    assert "\u2028" not in output
    access = [line for line in lines if "isp_gateway.access" in line and "/nothing" in line]
    assert len(access) == 3, lines
    assert "GET /nothing\\n2026-01-01 00:00:00,000 INFO" in access[0]
    assert "GET /nothing\\r\\n2026-01-01" in access[1]
    assert "GET /nothing\\u20282026-01-01" in access[2]
    assert DOCUMENT not in output
    assert "GET /api/v1/clients/by-documento/*** 404" in output
    assert "GET /api/v1/unknown/***/x***y 404" in output


def test_json_log_lines_stay_one_object_each(password_hash: str, tmp_path: Path) -> None:
    output = served_output(password_hash, tmp_path, LOG_FORMAT="json")
    lines = [json.loads(line) for line in output.splitlines()]
    paths = [line["path"] for line in lines if line["logger"] == "isp_gateway.access"]
    assert "/nothing\n" + FORGED in paths  # escaped by JSON itself: still one line
    assert DOCUMENT not in output
    assert "/api/v1/unknown/***/x***y" in paths


def test_masking_and_escaping_rules() -> None:
    assert mask_unknown_path("/a/12345/123456/1234567890123") == "/a/12345/***/***"
    assert mask_unknown_path("/api/v1/clients/by-phone/1") == "/api/v1/clients/by-phone/***"
    assert escape_control("a\x00b\x1b[31m\x7f\x85c") == "a\\x00b\\x1b[31m\\x7f\\x85c"
    assert escape_control("ñandú 42") == "ñandú 42"


def test_any_text_record_stays_one_line_and_a_traceback_keeps_its_lines() -> None:
    import logging

    from isp_gateway.web.logs import TextFormatter

    try:
        raise ValueError("boom")
    except ValueError:
        exc_info = sys.exc_info()
    record = logging.LogRecord(
        "isp_gateway", logging.WARNING, __file__, 1, "bad %s", ("x\nFAKE\r",), exc_info
    )
    text = TextFormatter().format(record)
    first, *rest = text.splitlines()
    assert first.endswith("isp_gateway: bad x\\nFAKE\\r")
    assert rest[0].startswith("Traceback") and rest[-1] == "ValueError: boom"
