"""`demo` (the simulator and the gateway on loopback) and `simulator`."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from isp_gateway.cli.common import EXIT_CONFIG, configure_logging, load_settings_or_exit

DEMO_PORT = 8000


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


def demo_overrides(
    api_key: str, upstream: str, username: str, password_hash: str
) -> dict[str, str]:
    """The demo gateway's settings: generated secrets against its simulator."""
    from isp_gateway.simulator import DEMO_TECHNICIAN_ID

    return {
        "UPSTREAM_NET_KEY": api_key,
        "UPSTREAM_NET_HOST": upstream,
        "JWT_SECRET_KEY": secrets.token_urlsafe(48),
        "API_USERNAME": username,
        "API_PASSWORD_HASH": password_hash,
        # A generated record may name no technician (issue 28): an agent's ticket for it
        # goes to a technician the simulator's staff has.
        "DEFAULT_TECHNICIAN_ID": str(DEMO_TECHNICIAN_ID),
        # The terminal shows the instructions, not a line per request.
        "LOG_LEVEL": "WARNING",
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
    try:
        upstream = f"http://127.0.0.1:{sim_port}"
        page = _wait_http(
            f"{upstream}/api/clientes/?limit=1",
            {"Authorization": f"Api-Key {api_key}"},
            time.monotonic() + 60,
        )
        document = page["results"][0]["cedula"] if page.get("results") else "12345678"
        username, password = "demo", secrets.token_urlsafe(12)
        overrides = demo_overrides(api_key, upstream, username, hash_password(password))
        settings = load_settings_or_exit(**overrides)
        configure_logging(settings.LOG_LEVEL, settings.LOG_FORMAT)
        base = f"http://{ns.host}:{port}"
        token_cmd = (
            f"TOKEN=$(curl -s -X POST {base}/api/v1/auth/token "
            f"-d 'username={username}&password={password}' "
            "| python3 -c 'import sys,json; print(json.load(sys.stdin)[\"access_token\"])')"
        )
        print(
            "\n".join(
                [
                    "",
                    "isp-gateway demo (simulated WispHub backend, generated secrets)",
                    f"  API explorer  {base}/docs   (Authorize: {username} / {password})",
                    f"  ReDoc         {base}/redoc",
                    f"  Health        {base}/health",
                    f"  Simulator     {upstream}  ({ns.clients} generated clients)",
                    "",
                    f"  username: {username}",
                    f"  password: {password}",
                    "",
                    "Try it:",
                    f"  {token_cmd}",
                    f'  curl -s -H "Authorization: Bearer $TOKEN" '
                    f"{base}/api/v1/clients/by-document/{document}",
                    "",
                    *_demo_data_lines(ns.clients, ns.seed),
                    "Ctrl-C stops both.",
                    "",
                ]
            ),
            flush=True,
        )
        serving.run(settings, ns.host, port, overrides=overrides)
    finally:
        sim.send_signal(signal.SIGINT)
        try:
            sim.wait(timeout=10)
        except subprocess.TimeoutExpired:
            sim.kill()
    return 0
