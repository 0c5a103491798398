"""The OpenAPI document is the contract: schemathesis 4 fuzzes every operation of the real
gateway over loopback, the simulator as its upstream, with a real token.

All checks and every phase (examples, coverage, fuzzing, stateful), a fixed seed and a bounded
number of examples per operation. A failure prints schemathesis' report, which gives each
failing case's reproduction as a curl command line (the token shown as [Filtered]).

Issue 17: against the demo's simulator (its dataset and answer cases) and the SHIPPED
upstream budget and fair share, no 500 and no 502 anywhere; the one 503 accepted is the
fuzzer's own share running out (`upstream_rate_limited`, or the ticket endpoint's
`ticket_creation_failed` with that reason, with Retry-After: st_hooks.only_fair_share_503);
after the run every phone and document the fuzzer changed upstream is valid. The test prints
the answers by status and the upstream writes the run made. ST_SEED and ST_MAX_EXAMPLES dig
deeper locally.

A new route is fuzzed as soon as it is in the document; to pass it needs every status it can
answer declared (`envelope.error_responses`) and every constraint its code enforces in the
schema (patterns, lengths, ranges, required combinations).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import httpx

from isp_gateway.settings import Settings
from isp_gateway.web.params import MAX_WAIT_SECONDS
from tests.conftest import PASSWORD, USERNAME, StartGateway, StartSimulator

# ST_SEED / ST_MAX_EXAMPLES override both for a local dig (the suite uses the defaults).
SEED = int(os.environ.get("ST_SEED", "20261123"))
# The demo's simulator (cli.cmd_demo) and the shipped budget (settings.py).
DEMO_CLIENTS = 2000
DEMO_SEED = 1
SHIPPED_PER_MINUTE = 100
SHIPPED_PER_HOUR = 1000
# What a stored number / document may be (CALLERS.md 2, spec 4.6): each number of a phone
# field, split on the separators the simulator reads, 7-15 digits once dashes, dots,
# parentheses and one leading + are removed; a document of 3-20 letters or digits.
PHONE_SPLIT = re.compile(r"\s*[,/;]\s*|\s+")
PHONE_NOISE = re.compile(r"[\s\-.()]")
PHONE = re.compile(r"[0-9]{7,15}")
DOCUMENT = re.compile(r"[A-Za-z0-9]{3,20}")
# Per operation. With 10 this test took 67 s inside the whole suite on the 2-core machine at a
# load average of 5-6 (the CLI alone: 29-42 s, about 820 cases); 25 took 75-139 s there.
# Raise it locally to dig deeper (seeds 1-5 passed at 10 and 25).
MAX_EXAMPLES = int(os.environ.get("ST_MAX_EXAMPLES", "10"))

# Statuses in the 5xx range that an operation answers by design, so `not_a_server_error`
# must accept them there (it refuses every 5xx otherwise). Each with the rule that fixes it.
# Issue 17: none. A 500 or 502 is reachable only through a backend failure, and the simulator
# injects none in this run; 503 is accepted on every operation below, but only as the fuzzer's
# own fair share (`upstream_rate_limited` with Retry-After), which st_hooks.only_fair_share_503
# enforces.
SERVER_ERRORS_BY_DESIGN: dict[tuple[str, str], tuple[list[str], str]] = {}
FAIR_SHARE_STATUS = "503"
# `max_response_time` (in `--checks all`) holds every answer to schemathesis' 10 s, except
# the two long polls: they may hold for the `wait` the caller chose (diagnose's default is
# 20 s, at most MAX_WAIT_SECONDS), then answer within UPSTREAM_TIMEOUT_SECONDS + 2 s
# (CALLERS.md 2), so their bound is that sum.
LONG_POLLS = [("GET", "/api/v1/ping/{task_id}/"), ("POST", "/api/v1/clients/{service_id}/diagnose")]
UPSTREAM_TIMEOUT_SECONDS = 3.0  # tests/conftest.py gateway_settings
LONG_POLL_LIMIT = MAX_WAIT_SECONDS + UPSTREAM_TIMEOUT_SECONDS + 2
# Checks left out entirely, each with its reason. None: `--checks all` runs every check.
EXCLUDED_CHECKS: dict[str, str] = {}


def _config(path: Path) -> Path:
    lines: list[str] = [
        # Every operation may answer the fuzzer's fair share running out (checked in the hook).
        "checks.not_a_server_error.expected-statuses = "
        f'["2xx", "3xx", "4xx", "{FAIR_SHARE_STATUS}"]',
        "",
    ]
    for method, route in LONG_POLLS:
        lines += [
            "[[operations]]",
            f'include-method = "{method}"',
            f'include-path = "{route}"',
            f"checks.max_response_time = {LONG_POLL_LIMIT}",
            "",
        ]
    for (method, route), (statuses, _why) in SERVER_ERRORS_BY_DESIGN.items():
        expected = ", ".join(f'"{s}"' for s in ["2xx", "3xx", "4xx", FAIR_SHARE_STATUS, *statuses])
        lines += [
            "[[operations]]",
            f'include-method = "{method}"',
            f'include-path = "{route}"',
            f"checks.not_a_server_error.expected-statuses = [{expected}]",
            "",
        ]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _status_counts(path: Path) -> Counter[int]:
    if not path.exists():
        return Counter()
    lines = path.read_text(encoding="utf-8").splitlines()
    return Counter(int(line.rsplit(" ", 1)[1]) for line in lines if line.strip())


def _valid_phone_field(value: object) -> bool:
    parts = [p for p in PHONE_SPLIT.split(str(value or "").strip()) if p]
    return all(PHONE.fullmatch(PHONE_NOISE.sub("", p).removeprefix("+")) for p in parts)


def _junk_writes(
    before: dict[int, tuple[object, object]], rows: list[dict[str, object]]
) -> list[tuple[object, object, object]]:
    junk: list[tuple[object, object, object]] = []
    for row in rows:
        sid = row["id_servicio"]
        phone, document = row.get("telefono"), row.get("cedula")
        old_phone, old_document = before.get(sid, (None, None))  # type: ignore[arg-type]
        if phone != old_phone and not _valid_phone_field(phone):
            junk.append((sid, "telefono", phone))
        if document != old_document and not DOCUMENT.fullmatch(str(document or "")):
            junk.append((sid, "cedula", document))
    return junk


def test_openapi_contract_holds_under_schemathesis(
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    tmp_path: Path,
) -> None:
    # Like the demo's (`isp-gateway demo` runs `simulator --clients 2000 --seed 1
    # --answer-cases`): the same dataset and the answer cases.
    simulator = start_simulator(clients=DEMO_CLIENTS, seed=DEMO_SEED, answer_cases=True)
    # The record's zone of each service and the backend's staff, for the hooks
    # (st_hooks._zone_of_the_record, _a_technician_the_backend_has).
    zones = tmp_path / "zones.json"
    zones.write_text(
        json.dumps(
            {
                str(row["id_servicio"]): row["zona"]["id"]
                for row in simulator.state.dataset.clients
                if isinstance(row.get("zona"), dict)
            }
        ),
        encoding="utf-8",
    )
    technicians = tmp_path / "technicians.json"
    technicians.write_text(
        json.dumps([int(member["id"]) for member in simulator.state.dataset.staff]),
        encoding="utf-8",
    )
    before = {
        row["id_servicio"]: (row.get("telefono"), row.get("cedula"))
        for row in simulator.state.dataset.clients
    }
    # Pings and diagnoses long-poll the upstream task every PING_POLL_INTERVAL_SECONDS (2 s by
    # default) while the simulator's pings take 0.3 s: polling every 0.1 s gives the same
    # answers without two seconds of waiting for each such request the fuzzer sends.
    # The SHIPPED budget (issue 17): tests/conftest.py raises it for other tests; here the
    # settings' own defaults apply, the fair share (UPSTREAM_CALLER_SHARE) included.
    gateway = start_gateway(
        simulator.url,
        UPSTREAM_TIMEOUT_SECONDS=UPSTREAM_TIMEOUT_SECONDS,
        PING_POLL_INTERVAL_SECONDS=0.1,
        UPSTREAM_RATE_PER_MINUTE=SHIPPED_PER_MINUTE,
        UPSTREAM_RATE_PER_HOUR=SHIPPED_PER_HOUR,
    )
    shipped = Settings.model_fields
    assert shipped["UPSTREAM_RATE_PER_MINUTE"].default == SHIPPED_PER_MINUTE
    assert shipped["UPSTREAM_RATE_PER_HOUR"].default == SHIPPED_PER_HOUR
    share = shipped["UPSTREAM_CALLER_SHARE"].default
    assert share == gateway.settings.UPSTREAM_CALLER_SHARE
    # A real token, from the token endpoint, as a bot gets it.
    issued = httpx.post(
        f"{gateway.url}/api/v1/auth/token",
        data={"username": USERNAME, "password": PASSWORD},
        timeout=30,
    )
    assert issued.status_code == 200, issued.text
    token = issued.json()["access_token"]

    command = [
        str(Path(sys.executable).with_name("st")),
        "--config-file",
        str(_config(tmp_path / "schemathesis.toml")),
        "run",
        f"{gateway.url}/openapi.json",
        "--checks",
        "all",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        str(SEED),
        "--header",
        f"Authorization: Bearer {token}",
        "--workers",
        "1",
        "--request-timeout",
        "20",
        "--generation-database",
        "none",
        "--no-color",
        "--warnings",
        "off",
    ]
    if EXCLUDED_CHECKS:
        command += ["--exclude-checks", ",".join(EXCLUDED_CHECKS)]
    status_log = tmp_path / "statuses.log"
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.contract.st_hooks",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "ST_STATUS_LOG": str(status_log),
        "ST_ZONES": str(zones),
        "ST_TECHNICIANS": str(technicians),
    }
    run = subprocess.run(
        command,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=tmp_path,
        check=False,
    )
    report = run.stdout + run.stderr
    statuses = _status_counts(status_log)
    # For the record (issue 17's closing note): the answers the run got, by status.
    print(f"schemathesis answers by status: {dict(sorted(statuses.items()))}")
    writes = {k: v for k, v in simulator.state.calls.items() if not k.startswith("GET ")}
    print(f"upstream calls other than GET during the run: {dict(sorted(writes.items()))}")
    assert run.returncode == 0, f"schemathesis found failures:\n{report}"
    assert statuses, f"the status hook recorded nothing:\n{report}"
    assert not [s for s in statuses if s >= 500 and s != 503], statuses
    # Nothing the fuzzer sent wrote junk upstream: every client field it changed holds only
    # numbers of 7-15 digits and a document of 3-20 letters or digits.
    junk = _junk_writes(before, simulator.state.dataset.clients)
    assert not junk, f"schema-violating writes reached the upstream: {junk}"
    # The generating phases ran and passed (a phase with nothing to do shows as skipped and
    # would hide a gap; "examples" only has work where the schema carries examples).
    for phase in ("Coverage", "Fuzzing", "Stateful"):
        assert f"✅ {phase}" in report, f"phase {phase} did not pass:\n{report}"
