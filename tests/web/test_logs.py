"""Logs of a whole served session, as `isp-gateway serve` writes them: the text and JSON
formats, one access line per request, and no secret, token, password, document or phone
anywhere in them (grepped over every line the process wrote)."""

from __future__ import annotations

import io
import json
import os
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from isp_gateway.web.logs import FILE_BATCH, PIPE_BATCH, default_batch, mask_path
from tests.conftest import (
    API_KEY,
    JWT_SECRET,
    PASSWORD,
    USERNAME,
    Simulator,
    StartSimulator,
    required_env,
)
from tests.support import base_env, serving

WRONG_PASSWORD = "not-the-password-4711"
TEXT_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ [\w.]+: ")
TEXT_ACCESS = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO isp_gateway\.access: "
    r"(?P<method>[A-Z]+) (?P<path>\S+) (?P<status>\d{3}) [\d.]+ms id=(?P<id>\S+)$"
)


def pick_client(sim: Simulator) -> tuple[str, str, int]:
    """A client with a long document and a plain 10-digit phone: digits no timestamp,
    pid or request id in a log line could hold by chance."""
    page = httpx.get(
        f"{sim.url}/api/clientes/",
        params={"limit": 200},
        headers={"Authorization": f"Api-Key {API_KEY}"},
    ).json()
    for row in page["results"]:
        document, phone = str(row.get("cedula") or ""), str(row.get("telefono") or "")
        if len(document) >= 8 and phone.isdigit() and len(phone) == 10:
            return document, phone, int(row["id_servicio"])
    raise AssertionError("no suitable client in the simulator's data")


def served_session(
    sim: Simulator, password_hash: str, tmp_path: Path, **env: str
) -> tuple[str, dict[str, Any]]:
    """Start `serve`, send a representative set of requests, stop it; all it logged."""
    document, phone, service_id = pick_client(sim)
    environment = base_env(**{**required_env(password_hash), "UPSTREAM_NET_HOST": sim.url}, **env)
    with (
        serving(environment, tmp_path) as served,
        httpx.Client(base_url=served.url, timeout=30) as client,
    ):
        bad = {"username": USERNAME, "password": WRONG_PASSWORD}
        assert client.post("/api/v1/auth/token", data=bad).status_code == 401
        good = {"username": USERNAME, "password": PASSWORD}
        login = client.post("/api/v1/auth/token", data=good)
        assert login.status_code == 200
        token = login.json()["access_token"]
        auth = {"Authorization": f"Bearer {token}", "X-Request-ID": "trace-me-1"}
        by_doc = client.get(f"/api/v1/clients/by-document/{document}", headers=auth)
        assert by_doc.status_code == 200, by_doc.text
        by_phone = client.get(f"/api/v1/clients/by-phone/{phone}", headers=auth)
        assert by_phone.status_code in (200, 404)
        client.get("/api/v1/clients/search", params={"q": document}, headers=auth)
        client.post(
            f"/api/v1/clients/{service_id}/verify",
            json={"name": "x", "address": document, "internet_plan_name": phone},
            headers=auth,
        )
        refused = {"Authorization": f"Bearer {token}x"}
        assert client.get(f"/api/v1/clients/by-phone/{phone}", headers=refused).is_error
        assert client.get("/api/v1/no-such-route", headers=auth).status_code == 404
    output = served.output
    secrets = {
        "password": PASSWORD,
        "wrong password": WRONG_PASSWORD,
        "password hash": password_hash,
        "token": token,
        "token signature": token.rsplit(".", 1)[1],
        "API key": API_KEY,
        "JWT secret": JWT_SECRET,
        "document": document,
        "phone": phone,
    }
    return output, secrets


def assert_no_secret(output: str, secrets: dict[str, Any]) -> None:
    for name, value in secrets.items():
        assert value not in output, f"the {name} is in the logs"


@pytest.mark.parametrize("server", ["granian", "uvicorn"])
def test_json_logs_one_object_a_line_without_secrets(
    start_simulator: StartSimulator, password_hash: str, tmp_path: Path, server: str
) -> None:
    sim = start_simulator()
    output, secrets = served_session(sim, password_hash, tmp_path, LOG_FORMAT="json", SERVER=server)
    assert_no_secret(output, secrets)
    lines = [json.loads(line) for line in output.splitlines()]  # every line is one object
    for line in lines:
        assert {"time", "level", "logger", "message", "request_id"} <= line.keys(), line
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])
    access = [line for line in lines if line["logger"] == "isp_gateway.access"]
    # One per request (the readiness polls of /health aside, however many they were).
    assert len([line for line in access if line["path"] != "/health"]) == 8
    traced = [line for line in access if line["request_id"] == "trace-me-1"]
    assert {line["path"] for line in traced} >= {
        "/api/v1/clients/by-document/***",
        "/api/v1/clients/by-phone/***",
        "/api/v1/clients/search",
    }
    for line in access:
        assert line["method"] in ("GET", "POST")
        assert isinstance(line["status"], int)
        assert isinstance(line["duration_ms"], float | int)
    assert any(line["message"].startswith("isp-gateway started") for line in lines)


def test_text_logs_keep_their_format_without_secrets(
    start_simulator: StartSimulator, password_hash: str, tmp_path: Path
) -> None:
    sim = start_simulator()
    output, secrets = served_session(sim, password_hash, tmp_path)
    assert_no_secret(output, secrets)
    lines = output.splitlines()
    assert all(TEXT_LINE.match(line) for line in lines), lines
    access = [m for m in map(TEXT_ACCESS.match, lines) if m]
    assert len(access) == len([line for line in lines if "isp_gateway.access" in line])
    traced = {m["path"] for m in access if m["id"] == "trace-me-1"}
    assert "/api/v1/clients/by-document/***" in traced
    assert "/api/v1/clients/by-phone/***" in traced


def test_access_log_off(
    start_simulator: StartSimulator, password_hash: str, tmp_path: Path
) -> None:
    sim = start_simulator()
    output, secrets = served_session(sim, password_hash, tmp_path, ACCESS_LOG="false")
    assert_no_secret(output, secrets)
    assert "isp-gateway started" in output
    assert "isp_gateway.access" not in output


def test_access_lines_are_written_soon_at_low_traffic(
    start_simulator: StartSimulator, password_hash: str, tmp_path: Path
) -> None:
    """A batch is written within a fraction of a second, not when it is full."""
    with serving(base_env(**required_env(password_hash)), tmp_path) as served:
        assert served.proc.stdout is not None
        httpx.get(f"{served.url}/health", headers={"X-Request-ID": "lonely-1"})
        deadline = time.monotonic() + 20
        seen = ""
        while "id=lonely-1" not in seen and time.monotonic() < deadline:
            seen = served.proc.stdout.readline()
        assert "GET /health 200" in seen and "id=lonely-1" in seen


def test_a_phone_or_document_over_several_path_segments_is_masked_whole() -> None:
    # A phone typed "315/123 4567" reaches the path as several segments; none may show.
    assert mask_path("/api/v1/clients/by-phone/315/123 4567") == "/api/v1/clients/by-phone/***"
    assert mask_path("/api/v1/clients/by-document/12/34") == "/api/v1/clients/by-document/***"
    assert mask_path("/api/v1/clients/search") == "/api/v1/clients/search"


def test_batches_stay_pipe_sized_on_a_pipe_and_grow_on_a_file(tmp_path: Path) -> None:
    """Workers sharing a pipe must not interleave lines (a write up to PIPE_BUF is atomic);
    to a file a batch may be larger, for fewer writes."""
    read, write = os.pipe()
    try:
        with os.fdopen(write, "w") as pipe, (tmp_path / "gateway.log").open("w") as file:
            assert default_batch(pipe) == PIPE_BATCH
            assert default_batch(file) == FILE_BATCH
    finally:
        os.close(read)
    assert default_batch(io.StringIO()) == PIPE_BATCH  # no file behind it: the safe size
    assert FILE_BATCH > PIPE_BATCH
