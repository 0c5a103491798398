"""`demo` (the simulator and the gateway on loopback) and `simulator`."""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from isp_gateway.cli.common import EXIT_CONFIG, configure_logging, load_settings_or_exit

DEMO_PORT = 8000
# The demo's router catalogue is read this often, so an outage raised shows within seconds.
DEMO_OUTAGE_SECONDS = 10


def cmd_simulator(ns: argparse.Namespace) -> int:
    from isp_gateway.simulator import config_from_args, serve_simulator

    api_key = os.environ.get("SIMULATOR_API_KEY") or os.environ.get("UPSTREAM_NET_KEY")
    if not api_key:
        print(
            "isp-gateway: set SIMULATOR_API_KEY (or UPSTREAM_NET_KEY) for the simulator",
            file=sys.stderr,
        )
        return EXIT_CONFIG
    configure_logging("WARNING")
    from isp_gateway.simulator.dataset import DataFileError

    try:
        serve_simulator(config_from_args(ns, api_key), ns.host, ns.port)
    except DataFileError as exc:  # raised while loading --data, before serving
        print(f"isp-gateway: simulator data file {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _wait_http(url: str, headers: dict[str, str], deadline: float) -> Any:
    import httpx

    while time.monotonic() < deadline:
        try:
            response = httpx.get(url, headers=headers, timeout=2)
            if response.status_code == 200:
                return response.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer in time")


def _cli() -> str:
    """How the user ran this command, to print commands they can paste: `.venv/bin/isp-gateway`
    under `make demo`, else this interpreter with `-m isp_gateway`."""
    if Path(sys.argv[0]).name == "isp-gateway":
        return shlex.quote(sys.argv[0])
    return f"{shlex.quote(sys.executable)} -m isp_gateway"


def gateway_overrides(
    api_key: str, upstream: str, username: str, password_hash: str, keys_file: Path
) -> dict[str, str]:
    """The demo gateway's settings beyond the environment: generated secrets, its own API
    keys file, a technician of the simulator's staff for clients that name none (an agent's
    ticket needs one), and a line per request in the log."""
    from isp_gateway.simulator import DEMO_TECHNICIAN_ID

    return {
        "UPSTREAM_NET_KEY": api_key,
        "UPSTREAM_NET_HOST": upstream,
        "JWT_SECRET_KEY": secrets.token_urlsafe(48),
        "API_USERNAME": username,
        "API_PASSWORD_HASH": password_hash,
        "API_KEYS_FILE": str(keys_file),
        "DEFAULT_TECHNICIAN_ID": str(DEMO_TECHNICIAN_ID),
        # Start-up, the first load and one access line per request (on stderr; the
        # instructions are on stdout).
        "LOG_LEVEL": "INFO",
    }


def _demo_data_lines(clients: int, seed: int) -> list[str]:
    """Where to try the money routes in the demo's data (the simulator generates the same
    data from the same clients and seed)."""
    from isp_gateway.simulator import DEMO_TECHNICIAN_ID, build_dataset, suspended_debtors

    lines = [
        f"Tickets for a record that names no technician go to staff {DEMO_TECHNICIAN_ID} "
        "(DEFAULT_TECHNICIAN_ID)."
    ]
    debtors = suspended_debtors(build_dataset(clients, seed, tickets=0))
    if debtors:
        client, invoices = debtors[0]
        service = client["id_servicio"]
        lines.append(
            f"Suspended and owing (a payment promise or report): service "
            f"{service}, invoice {invoices[0]}; {len(debtors)} such services."
        )
        # How to try both money routes from /docs (docs/payments.md).
        lines.append(
            f"  In /docs: verify {service} (data.verification_id), then POST "
            f"/api/v1/clients/{service}/payment-promise with X-Verification-Id and "
            '{"until": "<1 to 5 days ahead>"}.'
        )
        if len(debtors) > 1:
            other = debtors[1][0]["id_servicio"]
            lines.append(
                f"  A payment report: verify {other}, then POST /api/v1/clients/{other}/"
                "payment-reports with a receipt (JPEG, PNG, WEBP or PDF), reference, paid_on, "
                "payment_method_id, amount."
            )
    return [*lines, ""]


def _announce_when_up(url: str, banner: str, stop: threading.Event) -> None:
    """Print `banner` once `url` (the gateway's /health) answers: a command pasted from it
    then finds the gateway listening."""
    import httpx

    while not stop.is_set():
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                print(banner, flush=True)
                return
        except httpx.HTTPError:
            pass
        stop.wait(0.1)


def _notices(directory: Path) -> tuple[dict[str, str], list[str]]:
    """The demo's outage notices (docs/outages.md): a WEBHOOKS_FILE of its own with one
    subscription to a receiver on loopback. The gateway's settings for it, and the
    receiver's command (`webhooks receive`, which verifies and prints each notice)."""
    from isp_gateway.notices import subscriptions

    port = _free_port()
    url = f"http://127.0.0.1:{port}/hook"
    entry = subscriptions.new_entry("demo-receiver", url, list(subscriptions.EVENT_TYPES))
    path = directory / "webhooks.json"
    subscriptions.add(path, entry)
    settings = {
        "WEBHOOKS_FILE": str(path),
        "WEBHOOKS_ALLOW_HTTP": "true",
        "OUTAGE_CACHE_SECONDS": str(DEMO_OUTAGE_SECONDS),
    }
    receive = ["webhooks", "receive", "--port", str(port), "--secret", str(entry["secret"])]
    return settings, [sys.executable, "-m", "isp_gateway", *receive]


def _notice_lines(upstream: str) -> list[str]:
    body = '{"router_id": 1, "outage": true, "description": "Corte de fibra en la troncal"}'
    return [
        "Outage notices (a receiver here prints each signed notice it verifies):",
        f"  curl -s -X PUT {upstream}/_sim/routers -d '{body}'",
        f'  (within about {2 * DEMO_OUTAGE_SECONDS} s: outage.started; "outage": false ends it)',
        "",
    ]


def cmd_demo(ns: argparse.Namespace) -> int:
    from isp_gateway import serving
    from isp_gateway.auth.passwords import hash_password

    port = ns.port if ns.port is not None else DEMO_PORT
    if not _port_free(ns.host, port):
        if ns.port is not None:
            print(
                f"isp-gateway: {ns.host}:{port} is already in use; choose another --port",
                file=sys.stderr,
            )
            return 1
        # The default port is taken (another service, an earlier demo): printing its URLs
        # and credentials, then failing to bind, would point the user at someone else.
        port = _free_port()
        print(f"(port {DEMO_PORT} is in use; the demo listens on {port} instead)", flush=True)
    api_key = secrets.token_urlsafe(24)
    sim_port = ns.simulator_port or _free_port()
    # The demo's own API keys file, removed when it stops.
    keys_dir = Path(tempfile.mkdtemp(prefix="isp-gateway-demo-"))
    keys_file = keys_dir / "keys.json"
    stop = threading.Event()
    sim = subprocess.Popen(  # noqa: S603 - our own interpreter and module, fixed args
        [
            sys.executable,
            "-m",
            "isp_gateway",
            "simulator",
            "--port",
            str(sim_port),
            "--clients",
            str(ns.clients),
            "--seed",
            str(ns.seed),
            "--answer-cases",
            *(["--latency", ns.latency] if ns.latency else []),
        ],
        env={**os.environ, "SIMULATOR_API_KEY": api_key},
        # Its own process group: a terminal's Ctrl-C reaches only us, and we stop it with
        # one SIGINT. Two (the terminal's and ours) make uvicorn abort with a traceback.
        process_group=0,
    )
    receiver: subprocess.Popen[bytes] | None = None
    workdir = tempfile.TemporaryDirectory(prefix="isp-gateway-demo-")
    try:
        upstream = f"http://127.0.0.1:{sim_port}"
        page = _wait_http(
            f"{upstream}/api/clientes/?limit=1",
            {"Authorization": f"Api-Key {api_key}"},
            time.monotonic() + 60,
        )
        document = page["results"][0]["cedula"] if page.get("results") else "12345678"
        username, password = "demo", secrets.token_urlsafe(12)
        overrides = gateway_overrides(
            api_key, upstream, username, hash_password(password), keys_file
        )
        notice_settings, receiver_command = _notices(Path(workdir.name))
        overrides.update(notice_settings)
        settings = load_settings_or_exit(**overrides)
        configure_logging(settings.LOG_LEVEL, settings.LOG_FORMAT)
        base = f"http://{ns.host}:{port}"
        token_cmd = (
            f"TOKEN=$(curl -s -X POST {base}/api/v1/auth/token "
            f"-d 'username={username}&password={password}' "
            "| python3 -c 'import sys,json; print(json.load(sys.stdin)[\"access_token\"])')"
        )
        keys_cmd = (
            f"KEY=$(API_KEYS_FILE={shlex.quote(str(keys_file))} {_cli()} keys create "
            "my-bot --scopes '*')"
        )
        banner = "\n".join(
            [
                "",
                "isp-gateway demo (simulated WispHub backend, generated secrets)",
                f"  API explorer  {base}/docs   (Authorize: {username} / {password})",
                f"  ReDoc         {base}/redoc",
                f"  Health        {base}/health",
                f"  Simulator     {upstream}  ({ns.clients} generated clients)",
                f"  API keys      {keys_file}  (removed when the demo stops)",
                "",
                f"  username: {username}",
                f"  password: {password}",
                "",
                "Try it:",
                f"  {token_cmd}",
                f'  curl -s -H "Authorization: Bearer $TOKEN" '
                f"{base}/api/v1/clients/by-document/{document}",
                "",
                "With an API key (the running demo accepts a new key within 5 s):",
                f"  {keys_cmd}",
                f'  curl -s -H "X-API-Key: $KEY" {base}/api/v1/clients/by-document/{document}',
                "",
                f"Identity policy: {settings.IDENTITY_POLICY}. Use IDENTITY_POLICY=strict "
                "for any bot that",
                "strangers can talk to: under spec a failed verify shows the record's "
                "address, plan",
                "and price, and a name plus a public plan resolves a customer's record.",
                "",
                *_demo_data_lines(ns.clients, ns.seed),
                *_notice_lines(upstream),
                "Ctrl-C stops them all.",
                "",
            ]
        )
        # After the gateway answers, never before: a command pasted at once must find it.
        threading.Thread(
            target=_announce_when_up,
            args=(f"{base}/health", banner, stop),
            name="demo-banner",
            daemon=True,
        ).start()
        # Its own process group, like the simulator's: stopped by us, once.
        receiver = subprocess.Popen(receiver_command, process_group=0)  # noqa: S603 - ours
        serving.run(settings, ns.host, port, overrides=overrides)
    finally:
        stop.set()
        if receiver is not None:
            receiver.send_signal(signal.SIGINT)
            try:
                receiver.wait(timeout=10)
            except subprocess.TimeoutExpired:
                receiver.kill()
        workdir.cleanup()
        sim.send_signal(signal.SIGINT)
        try:
            sim.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sim.kill()
        shutil.rmtree(keys_dir, ignore_errors=True)
    return 0
