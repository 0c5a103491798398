"""examples/agent_conversation.py, the scripted agent conversation a newcomer runs against
`make demo`, run as a newcomer runs it (its own process) against a test gateway."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from isp_gateway.kit.actions import Action
from isp_gateway.kit.messages import Language, text
from tests.conftest import PASSWORD, USERNAME, Gateway

# The sentences a diagnosis answers with (the catalogue's, kit/messages.py).
_DIAGNOSIS = {
    action: text(action, language=Language.ES)
    for action in (
        Action.SERVICE_CANCELLED,
        Action.SERVICE_SUSPENDED,
        Action.ZONE_OUTAGE,
        Action.STABLE_CONNECTION,
        Action.INTERMITTENT_CONNECTION,
        Action.NO_INTERNET,
        Action.PING_PENDING,
    )
}

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "agent_conversation.py"


def run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120
    )


def test_the_conversation_walks_find_verify_account_diagnose(gateway: Gateway) -> None:
    done = run_script("--url", gateway.url, "--username", USERNAME, "--password", PASSWORD)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    called = [line.split("-> ")[1].split("(")[0] for line in lines if "agent  -> " in line]
    assert called == ["find_customer", "verify_customer", "customer_account", "diagnose_connection"]
    answers = [line for line in lines if line.startswith("  tool   <- ")]
    assert len(answers) == 4 and not any("error   <- " in line for line in lines)
    assert "Encontré el servicio" in answers[0]
    assert "Identidad verificada" in answers[1]
    assert "saldo pendiente" in answers[2]
    assert any(sentence in answers[3] for sentence in _DIAGNOSIS.values()), answers[3]
    # The verification id is never printed.
    assert "ver_" not in done.stdout.replace("ver_…", "")


def test_a_wrong_password_says_so_without_a_traceback(gateway: Gateway) -> None:
    done = run_script("--url", gateway.url, "--username", USERNAME, "--password", "wrong")
    assert done.returncode != 0
    assert "login refused" in done.stderr and "Traceback" not in done.stderr
