"""Issue 28, point 20: `isp-gateway demo`, run as a real process. Its banner (and the curl
lines in it) comes once the gateway answers, never before; it logs a line per request; it
has an API keys file of its own, named in the banner with the command that makes a key the
running demo accepts within 5 s (removed when it stops); and an agent's ticket works for a
customer with no technician (DEFAULT_TECHNICIAN_ID names one of the simulator's staff)."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from isp_gateway.cli.demo import gateway_overrides
from isp_gateway.simulator.dataset import build_dataset
from tests.agents.test_mcp_conversations import ROOMY, open_verified_ticket, ticketless_customer
from tests.cli.conftest import demo_banner
from tests.cli.test_cli import parse_demo
from tests.conftest import StartGateway, StartSimulator
from tests.support import base_env


def run_banner_line(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", line], capture_output=True, text=True, timeout=60, cwd=cwd, env=base_env()
    )


def test_the_banner_comes_once_the_gateway_answers(
    tmp_path: Path, spawned: list[subprocess.Popen[str]]
) -> None:
    proc, lines, port = demo_banner(tmp_path, spawned)
    # At once, no retry: whatever the banner says is already true.
    health = httpx.get(f"http://127.0.0.1:{port}/health", timeout=5)
    assert health.status_code == 200, lines
    demo = parse_demo(lines)
    text = demo["text"]

    # The demo's own keys file, and the command that makes a key, printed ready to paste.
    (keys_file,) = re.findall(r"API keys\s+(\S+)", text)
    assert Path(keys_file).parent.is_dir() and not Path(keys_file).exists()
    section = lines[
        lines.index("With an API key (the running demo accepts a new key within 5 s):") :
    ]
    create, lookup = section[1].strip(), section[2].strip()
    assert create.startswith(f"KEY=$(API_KEYS_FILE={keys_file} ")
    assert "keys create" in create
    assert lookup.startswith('curl -s -H "X-API-Key: $KEY" ')
    # Pasted as printed: a key made, then accepted by the running demo within 5 s.
    script = "\n".join(
        [
            create,
            'echo "$KEY" > key.txt',
            "for i in $(seq 60); do",
            f"  ANSWER=$({lookup})",
            '  case "$ANSWER" in *client_found*) echo "$ANSWER"; exit 0;; esac',
            "  sleep 0.1",
            "done",
            "exit 1",
        ]
    )
    started = time.monotonic()
    pasted = run_banner_line(script, tmp_path)
    assert pasted.returncode == 0, pasted.stdout + pasted.stderr
    assert time.monotonic() - started < 5 + 2
    assert '"action":"client_found"' in pasted.stdout.replace(" ", "")
    assert (tmp_path / "key.txt").read_text().startswith("igw_")

    # A line per request in its log (the document masked).
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode in (0, 130)
    assert "Traceback" not in err, err
    assert re.search(r"GET /health 200 .*ms id=", err), err[-3000:]
    assert re.search(r"GET /api/v1/clients/by-document/\*\*\* 200 ", err), err[-3000:]
    document = demo["document_url"].rsplit("/", 1)[1]
    assert document not in err
    # Its keys file goes with it.
    assert not Path(keys_file).parent.exists()


@pytest.mark.anyio
async def test_an_agents_ticket_works_for_a_customer_without_technician(
    tmp_path: Path,
    start_simulator: StartSimulator,
    start_gateway: StartGateway,
    password_hash: str,
) -> None:
    sim = start_simulator(clients=300)
    overrides = gateway_overrides("k", sim.url, "demo", password_hash, tmp_path / "keys.json")
    technician = int(overrides["DEFAULT_TECHNICIAN_ID"])
    # One of the staff of every dataset the demo's simulator generates, whatever its seed.
    for seed in (1, 2, 3):
        assert technician in {member["id"] for member in build_dataset(300, seed).staff}
    gw = start_gateway(sim.url, DEFAULT_TECHNICIAN_ID=technician, MAX_ACTIVE_TICKETS_PER_ZONE=ROOMY)
    client = ticketless_customer(gw, technician=False)
    opened = await open_verified_ticket(gw, client, "Internet Lento", "Navega muy lento.")
    assert not opened.is_error, opened.texts
    ticket_id = opened.data["ticket"]["ticket_id"]
    assert gw.get(f"/api/v1/tickets/{ticket_id}").json()["data"]["technician_id"] == technician
