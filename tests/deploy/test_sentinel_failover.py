"""Issue 21: a Redis Sentinel failover under load, on loopback with Debian's redis-server (one
master, one replica, three sentinels run as `redis-server --sentinel`, quorum 2).

Two gateway replicas, real `isp-gateway serve` processes started with the systemd unit's
command line, find the master through the sentinels, behind deploy/nginx.conf run by Debian's
nginx (tests/deploy/conftest.py, `run_edge`). While bots look customers up and create tickets
over HTTPS through nginx in a zone near its cap (each bot repeating its request with the same
Idempotency-Key after any error), the master is killed (SIGKILL) at the worst moment: the
upstream has just created a ticket that no replica has recorded yet. Then: nothing is created
twice, the zone cap holds, no ticket is created without its lock, lookups keep answering from
the warm index, /ready (asked of each replica directly) follows the store both ways, and the
service is whole again within the sentinels' failover time plus 10 s. The figures are
printed (docs/deployment.md, "Redis Sentinel")."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis

from isp_gateway.auth.tokens import issue_token
from isp_gateway.simulator import SimulatorConfig, create_simulator_app
from tests.conftest import API_KEY, USERNAME, gateway_settings, serve_env
from tests.deploy.conftest import Replica, needs_edge, run_edge
from tests.support import SENTINEL_MASTER, SentinelGroup, run_server, wait_until
from tests.tickets.conftest import ZONE_SERVICES, AfterTicketPost, build_dataset, ticket_body

ZONE = 1  # two active tickets in the dataset
CAP = 4  # so two free slots
# One bot per (service, subject): none of them is open in the dataset.
BOTS = [
    (s, subject)
    for s in ZONE_SERVICES[ZONE]
    for subject in ("No Tiene Internet", "Cambio de Antena")
]
DOCUMENTS = [str(10_000_000 + s) for z in (2, 3) for s in ZONE_SERVICES[z]]
FINAL = {(201, "ticket_created"), (409, "zone_ticket_limit_reached")}
# Answers a bot repeats its request after (every one says: nothing done, or safe to repeat).
RETRY = {
    (503, "store_unavailable"),
    (503, "ticket_creation_failed"),  # zone_busy
    (409, "idempotency_key_in_progress"),
}
# Bounds for a starved machine; the figures printed are what is measured.
FAILOVER_DEADLINE = 30.0
RECOVERY_MARGIN = 10.0


@dataclass
class Timeline:
    killed: threading.Event = field(default_factory=threading.Event)
    killed_at: float = 0.0
    promoted_at: float = 0.0
    # When the last round of questions began in which every sentinel named the old master:
    # the promotion came after it (see wait_for_promotion).
    unpromoted_at: float = 0.0
    stop: threading.Event = field(default_factory=threading.Event)
    # (time, replica index, status, store check) of every /ready asked
    ready: list[tuple[float, int, int, str]] = field(default_factory=list)
    # (time, status, seconds) of every lookup
    lookups: list[tuple[float, int, float]] = field(default_factory=list)


def kill_master(group: SentinelGroup, timeline: Timeline) -> Callable[[], None]:
    def kill() -> None:
        process = group.master.process
        assert process is not None
        process.kill()
        process.wait(timeout=10)
        timeline.killed_at = time.monotonic()
        timeline.killed.set()

    return kill


def wait_for_promotion(group: SentinelGroup, old_port: int, timeline: Timeline) -> int:
    """The port of the replica a sentinel names in place of `old_port`. Sets
    `timeline.unpromoted_at` from the sentinels' answers, not from when this thread notices
    the change (it may stall): a sentinel never names the old master again once it switched,
    so when a round that found all of them on the old master began, none had promoted and no
    gateway could find a new master yet."""
    found: list[int] = []

    def promoted() -> bool:
        asked_at = time.monotonic()
        ports: list[int | None] = []
        for sentinel in group.sentinels:
            try:
                with redis.Redis(port=sentinel.port, socket_timeout=1) as client:
                    address = client.sentinel_get_master_addr_by_name(SENTINEL_MASTER)
            except redis.RedisError:
                address = None  # no answer: the round tells nothing of this sentinel
            ports.append(int(address[1]) if address else None)
        found.extend(port for port in ports if port not in (None, old_port))
        if not found and all(port == old_port for port in ports):
            timeline.unpromoted_at = asked_at
        return bool(found)

    wait_until(promoted, timeout=FAILOVER_DEADLINE, message="a failover")
    return found[0]


def watch_ready(replicas: list[Replica], timeline: Timeline) -> None:
    """/ready of each replica, asked directly (nginx keeps it for the monitoring network)."""
    with ExitStack() as stack:
        clients = [stack.enter_context(httpx.Client(base_url=r.url, timeout=10)) for r in replicas]
        while not timeline.stop.is_set():
            for n, client in enumerate(clients):
                answer = client.get("/ready")
                store = answer.json()["checks"]["store"]
                timeline.ready.append((time.monotonic(), n, answer.status_code, store))
            time.sleep(0.05)  # the pace of the probes, not a wait


def under_way(timeline: Timeline, watchers: list[Future[None]]) -> None:
    """Until a few more probes of each replica and lookups are made from now on (a watcher
    that stopped says why)."""
    ready, lookups = len(timeline.ready), len(timeline.lookups)

    def more() -> bool:
        for watcher in watchers:
            if watcher.done():
                watcher.result()
        return len(timeline.ready) >= ready + 6 and len(timeline.lookups) >= lookups + 4

    wait_until(more, message="a few more probes and lookups")


def look_up(api: httpx.Client, timeline: Timeline, bot: int) -> None:
    n = bot
    while not timeline.stop.is_set():
        document = DOCUMENTS[n % len(DOCUMENTS)]
        started = time.monotonic()
        answer = api.get(f"/api/v1/clients/by-document/{document}")
        timeline.lookups.append((started, answer.status_code, time.monotonic() - started))
        n += 1
        time.sleep(0.01)  # the pace of a bot's lookups, not a wait


def create(api: httpx.Client, bot: int) -> tuple[httpx.Response, float]:
    """One bot's ticket: repeated with its Idempotency-Key until a final answer."""
    service_id, subject = BOTS[bot]
    body = ticket_body(
        zone_id=ZONE, service_id=service_id, subject=subject, description=f"bot {bot}"
    )
    key = {"Idempotency-Key": f"failover-{bot}-{uuid.uuid4().hex}"}
    deadline = time.monotonic() + FAILOVER_DEADLINE + RECOVERY_MARGIN + 20
    while True:
        answer = api.post("/api/v1/tickets", json=body, headers=key)
        said = (answer.status_code, answer.json().get("action"))
        if said in FINAL:
            return answer, time.monotonic()
        assert said in RETRY, answer.text
        assert time.monotonic() < deadline, f"bot {bot} had no final answer: {answer.text}"
        time.sleep(0.1)  # the bot's pause before it repeats the request, not a wait


def active_in_zone(state: Any, zone: int) -> int:
    services = set(ZONE_SERVICES[zone])

    def service_of(row: dict[str, Any]) -> int:
        ref = row["servicio"]
        return int(ref["id_servicio"] if isinstance(ref, dict) else ref)

    return sum(1 for t in state.dataset.tickets if t["estado"] == 1 and service_of(t) in services)


@needs_edge
def test_a_sentinel_failover_under_load(
    sentinel_group: SentinelGroup, tmp_path: Path, password_hash: str
) -> None:
    timeline = Timeline()
    data = tmp_path / "upstream.json"
    data.write_text(json.dumps(build_dataset(), ensure_ascii=False), "utf-8")
    app = create_simulator_app(SimulatorConfig(api_key=API_KEY, data_file=data))
    # The second ticket POST: the first ticket is made and recorded, the second is made
    # upstream and the master dies before any replica has recorded it.
    upstream = AfterTicketPost(app, hook=kill_master(sentinel_group, timeline), nth=2)
    old_port = sentinel_group.master.port
    directory = tmp_path / "edge"
    directory.mkdir()
    with ExitStack() as stack:
        url = stack.enter_context(run_server(upstream))
        env = serve_env(
            url,
            password_hash,
            REDIS_SENTINELS=sentinel_group.addresses,
            REDIS_SENTINEL_MASTER=SENTINEL_MASTER,
            MAX_ACTIVE_TICKETS_PER_ZONE=str(CAP),
        )
        edge = stack.enter_context(run_edge(directory, env))  # both replicas ready
        token = issue_token(gateway_settings(url, password_hash), USERNAME)
        auth = {"Authorization": f"Bearer {token}"}
        api = stack.enter_context(edge.client())
        api.headers.update(auth)
        for replica in edge.replicas:  # warm: the bot's token is verified once per process
            with httpx.Client(base_url=replica.url, headers=auth, timeout=30) as direct:
                for document in DOCUMENTS:
                    assert direct.get(f"/api/v1/clients/by-document/{document}").status_code == 200
        assert active_in_zone(upstream.state, ZONE) == CAP - 2

        with ThreadPoolExecutor(3 + len(BOTS)) as pool:
            watchers = [pool.submit(watch_ready, edge.replicas, timeline)]
            watchers += [pool.submit(look_up, api, timeline, n) for n in range(2)]
            under_way(timeline, watchers)  # the lookups and probes
            bots = [pool.submit(create, api, n) for n in range(len(BOTS))]
            try:
                assert timeline.killed.wait(FAILOVER_DEADLINE), "the second ticket never came"
                new_port = wait_for_promotion(sentinel_group, old_port, timeline)
                timeline.promoted_at = time.monotonic()  # when seen (the figure printed)
                answers = [bot.result(timeout=FAILOVER_DEADLINE + 60) for bot in bots]

                # Whole again: both replicas ready after the outage, every bot answered.
                def whole() -> bool:
                    for watcher in watchers:  # one that stopped says why
                        if watcher.done():
                            watcher.result()
                    return all(_ready_again(timeline, n) for n in range(2))

                wait_until(
                    whole,
                    timeout=FAILOVER_DEADLINE,
                    interval=0.05,
                    message=lambda: f"ready again: {timeline.ready[-4:]}",
                )
                under_way(timeline, watchers)  # a few more probes and lookups once whole
            finally:
                timeline.stop.set()
            for watcher in watchers:
                watcher.result(timeout=30)
        zone = api.get(f"/api/v1/tickets/zone-blocked/{ZONE}").json()["data"]
        # The bots' requests went through nginx, to both replicas.
        replicas = {replica.url.removeprefix("http://") for replica in edge.replicas}
        assert replicas <= set(edge.upstreams())
    assert new_port == sentinel_group.replicas[0].port

    # Nothing created twice: two tickets for two free slots, each the answer of one bot
    # (the second one through the repeat of the request whose master died).
    created = upstream.state.created_tickets
    assert len(created) == 2
    assert len({t["descripcion"] for t in created}) == 2
    made = sorted(a.json()["data"]["ticket_id"] for a, _ in answers if a.status_code == 201)
    assert made == sorted(t["id_ticket"] for t in created)
    refused = [a for a, _ in answers if a.status_code == 409]
    assert len(refused) == len(BOTS) - 2
    # The zone cap holds, upstream as the service counts it.
    assert active_in_zone(upstream.state, ZONE) == CAP
    assert (zone["active_tickets"], zone["is_blocked"]) == (CAP, True)
    # No ticket created without its lock: between the kill and the promotion no lock could
    # be taken, and no ticket POST reached the upstream (up to a time before the promotion
    # whatever this thread's pace: a POST soon after it is legitimate).
    assert not [t for t in upstream.arrivals if timeline.killed_at < t < timeline.unpromoted_at]

    # Lookups kept answering from the warm index, during the outage too.
    assert {status for _, status, _ in timeline.lookups} == {200}
    outage = [s for t, _, s in timeline.lookups if timeline.killed_at <= t <= timeline.promoted_at]
    assert outage, "no lookup was made during the outage"

    # /ready follows the store both ways, on both replicas; ready again, it stays ready.
    back_at = []
    for n in range(2):
        seen = [(t, status, store) for t, g, status, store in timeline.ready if g == n]
        before = [status for t, status, _ in seen if t < timeline.killed_at]
        assert before and set(before) == {200}
        down = [(t, store) for t, status, store in seen if status == 503]
        assert down and {store for _, store in down} == {"unavailable"}
        first_down = down[0][0]
        after = [(t, status) for t, status, _ in seen if t > first_down and status == 200]
        assert after
        back_at.append(after[0][0])
        assert {status for t, status, _ in seen if t >= after[0][0]} == {200}

    failover = timeline.promoted_at - timeline.killed_at
    answered = max(at for _, at in answers) - timeline.killed_at
    whole = max(answered, *(at - timeline.killed_at for at in back_at))
    print(
        f"\nsentinel failover: the sentinels promoted the replica {failover:.2f} s after the "
        f"master was killed; /ready 200 again after "
        + " and ".join(f"{at - timeline.killed_at:.2f} s" for at in back_at)
        + f"; every ticket bot answered after {answered:.2f} s; whole after {whole:.2f} s "
        f"(bound {failover + RECOVERY_MARGIN:.2f} s); lookups: {len(timeline.lookups)} "
        f"answered 200, {len(outage)} during the outage (slowest {max(outage):.2f} s)"
    )
    assert whole <= failover + RECOVERY_MARGIN


def _ready_again(timeline: Timeline, replica: int) -> bool:
    """Whether the replica answered /ready 503 after the kill and 200 since."""
    seen = [(t, status) for t, g, status, _ in timeline.ready if g == replica]
    downs = [t for t, status in seen if status == 503 and t > timeline.killed_at]
    return bool(downs) and any(status == 200 and t > downs[0] for t, status in seen)
