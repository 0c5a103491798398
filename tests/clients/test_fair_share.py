"""The fair share over loopback (CALLERS.md 2 and 6): one end user cannot drain the backend
budget for everyone; past its share it gets 503 upstream_rate_limited, others are served."""

from __future__ import annotations

from tests.clients.conftest import StartPair


def _miss(gw: object, n: int, user: str) -> object:
    # An unknown document: each one is a lookup miss the upstream is asked about.
    return gw.get(  # type: ignore[attr-defined]
        f"/api/v1/clients/by-document/{90000000 + n}", headers={"X-End-User-Id": user}
    )


def test_one_end_user_cannot_drain_the_budget(start_pair: StartPair) -> None:
    sim, gw = start_pair(UPSTREAM_RATE_PER_MINUTE=40, UPSTREAM_CALLER_SHARE=0.5)
    # CALLERS.md 6: a person's share binds once another person of the same caller spends
    # (alone, she would be served up to the minute's share reserve).
    assert _miss(gw, 300, "alice").status_code == 404  # type: ignore[attr-defined]
    statuses = []
    for n in range(30):  # a fuzz run by one person: every lookup a new miss
        response = _miss(gw, n, "mallory")
        statuses.append(response.status_code)  # type: ignore[attr-defined]
        if response.status_code == 503:  # type: ignore[attr-defined]
            refused = response
            break
    assert statuses[-1] == 503, statuses
    # Exactly her share of the minute: 0.5 of her caller's 0.5 of 40.
    assert statuses[:-1] == [404] * 10
    out = refused.json()  # type: ignore[attr-defined]
    assert (out["ok"], out["action"]) == (False, "upstream_rate_limited")
    assert 1 <= int(refused.headers["Retry-After"]) <= 60  # type: ignore[attr-defined]
    # She stays refused; everyone else is still served by the upstream.
    assert _miss(gw, 100, "mallory").status_code == 503  # type: ignore[attr-defined]
    before = sim.state.calls["GET /api/clientes/"]
    for n in range(3):
        assert _miss(gw, 200 + n, "alice").status_code == 404  # type: ignore[attr-defined]
    assert sim.state.calls["GET /api/clientes/"] == before + 3
    # A warm lookup hit costs no upstream call: she is still answered from the cache.
    assert gw.get("/api/v1/clients/by-document/12345678").status_code == 200
