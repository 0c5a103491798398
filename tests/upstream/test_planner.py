"""The refresh planner: every whole list gets an interval within the background budget."""

from __future__ import annotations

import logging
import time

import pytest

from isp_gateway.store import MemoryStore
from isp_gateway.upstream.budget import RateBudget
from isp_gateway.upstream.planner import RefreshPlanner
from tests.conftest import Simulator, StartGateway


def planner(per_minute: int = 100, per_hour: int = 1000, reserve: float = 0.3) -> RefreshPlanner:
    return RefreshPlanner(RateBudget(MemoryStore(), per_minute, per_hour, reserve=reserve))


def test_small_lists_keep_their_configured_lifetime() -> None:
    plan = planner()
    plan.register("plans:list", 900)
    plan.register("clients", 300)
    plan.measured("plans:list", 1)
    plan.measured("clients", 2)  # 2 pages every 240 s: 30 calls an hour
    assert plan.lifetime("clients") == 300
    assert plan.refresh_every("clients") == pytest.approx(240)
    assert plan.lifetime("plans:list") == 900
    assert not any(p.stretched for p in plan.plan().values())


def test_large_lists_share_the_background_budget_and_leave_the_reserve() -> None:
    plan = planner()
    for name, lifetime in (("clients", 300), ("invoices", 300), ("tickets", 300), ("plans", 900)):
        plan.register(name, lifetime)
    # 200,000 clients, 60,000 pending invoices, 5,000 tickets at 500 a page.
    for name, pages in (("clients", 400), ("invoices", 120), ("tickets", 10), ("plans", 1)):
        plan.measured(name, pages)
    result = plan.plan()
    spent = sum(p.calls_per_hour for p in result.values())
    # Within the hour's background share (700 of 1000), with the bucket margin.
    assert spent <= 700
    assert spent == pytest.approx(plan.capacity() * 3600)
    # Lifetimes are lower bounds: never shortened.
    for p in result.values():
        assert p.lifetime >= p.configured
    # The small lists are not slowed down for the big ones.
    assert result["tickets"].lifetime == 300
    assert result["plans"].lifetime == 900
    # The two big ones share what is left equally (same calls an hour), so the bigger one
    # is refreshed less often.
    assert result["clients"].calls_per_hour == pytest.approx(result["invoices"].calls_per_hour)
    assert result["clients"].stretched and result["invoices"].stretched
    assert result["clients"].lifetime > result["invoices"].lifetime > 300
    assert plan.refresh_intervals()["clients"] == result["clients"].refresh_every


def test_a_larger_reserve_plans_longer_intervals() -> None:
    lean, roomy = planner(reserve=0.1), planner(reserve=0.5)
    for plan in (lean, roomy):
        plan.register("clients", 300)
        plan.measured("clients", 400)
    assert roomy.lifetime("clients") > lean.lifetime("clients")
    assert roomy.lifetime("clients") * 0.5 == pytest.approx(lean.lifetime("clients") * 0.9)


def test_the_plan_is_logged_when_a_size_changes_it(caplog: pytest.LogCaptureFixture) -> None:
    plan = planner()
    plan.register("clients", 300)
    caplog.set_level(logging.INFO, logger="isp_gateway.planner")
    plan.measured("clients", 400)
    first = [r.getMessage() for r in caplog.records]
    assert any("clients: 400 pages every" in m for m in first)
    assert any("cannot be refreshed every 240s" in m for m in first)
    caplog.clear()
    plan.measured("clients", 400)  # same size: nothing new to say
    assert not caplog.records
    plan.measured("clients", 420)
    assert any("clients: 420 pages every" in r.getMessage() for r in caplog.records)


def test_fastest_load_follows_the_minute_share() -> None:
    plan = planner()  # 70 background calls a minute
    assert plan.fastest_load(70) == 0
    # 400 pages: 70 at once, then 330 more at 70 a (bucketed) minute.
    assert plan.fastest_load(400) == pytest.approx(330 / 70 * 66)


def test_only_large_lists_are_loaded_as_background_work_whoever_waits() -> None:
    plan = planner()  # 30 interactive calls kept a minute
    plan.register("clients", 300)
    plan.register("plans:list", 900)
    assert not plan.is_large("clients")  # not measured yet: one page
    plan.measured("clients", 400)
    plan.measured("plans:list", 1)
    assert plan.is_large("clients")
    assert not plan.is_large("plans:list")
    assert not plan.is_large("unknown")


def test_a_first_load_may_hold_its_lock_as_long_as_the_hour_allows() -> None:
    plan = planner()
    plan.register("clients", 300)
    # Unmeasured: as many pages as the hour's background share (700), paced by the minute.
    assert plan.load_allowance("clients") == pytest.approx(plan.fastest_load(700))
    plan.measured("clients", 200)
    assert plan.load_allowance("clients") == pytest.approx(plan.fastest_load(200))


def test_start_up_says_the_plan_once_and_short(
    caplog: pytest.LogCaptureFixture,
    simulator: Simulator,
    start_gateway: StartGateway,
) -> None:
    """Issue 28: the plan was logged at INFO at start-up and once more for each list measured,
    six lines of about 700 characters; now one short line, the details at DEBUG."""
    caplog.set_level(logging.DEBUG, logger="isp_gateway.planner")
    gw = start_gateway(simulator.url)
    planner = gw.runtime.planner
    lists = len(planner.plan())
    # The lists loaded at start-up (payment methods load on demand): each one measured.
    loaded = {"clients", "plans:list", "tickets:active", "invoices:pending", "routers"}
    deadline = time.monotonic() + 30
    while not all(any(f"({name} measured at" in r.getMessage() for r in caplog.records)
                  for name in loaded):  # fmt: skip
        assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
        time.sleep(0.05)
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    assert said == [
        f"refresh plan (start-up): {lists} lists kept warm within "
        f"{planner.capacity() * 3600:.0f} background upstream calls/h of 1000000; each "
        "list's plan at DEBUG"
    ]
    assert len(said[0]) < 160
    # The details are there for whoever asks for them.
    details = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("clients: 1 pages every 240s" in message for message in details), details
