"""(a)'s refusals: the server CPU a request of an unknown route, a bad token, a key without
the route's scope and a malformed JSON body, and of the same cached lookup with an API key,
each beside the cached lookup with the JWT on the same gateway (CALLERS.md 6 "The cost of
refusing": each at most 1.00x, the key at most 1.03x)."""

from __future__ import annotations

import statistics

import httpx

from bench import procs, wrk

# The refusals measured beside a cached lookup (CALLERS.md 6 "The cost of refusing": each
# costs at most the server CPU of a successful cached lookup).
ROUNDS = 5
SECONDS = 2


def measure(
    gw: procs.Served,
    token: str,
    document: str,
    connections: int,
    keys_in_use: tuple[str, str],
    bare: procs.Served,
    server: str = procs.SERVER,
) -> list[str]:
    """The server CPU a request of each refusal (an unknown route, a bad token, a key without
    the route's scope, a malformed JSON body), and of the same cached lookup with an API key,
    beside the cached lookup with the JWT: each case's run right beside a run of the JWT
    lookup, one first then the other by turns. Each figure is the median of its rounds'
    ratios to that JWT run: a pair measured seconds apart shares the machine's load, which
    drifts more than these costs differ; the spread of the ratios is printed beside them."""
    api_key, scopeless_key = keys_in_use
    lookup = f"/api/v1/clients/by-document/{document}"
    cases = [
        ("cached lookup (JWT)", "GET", lookup, {"Authorization": f"Bearer {token}"}, None),
        ("cached lookup, API key", "GET", lookup, {"X-API-Key": api_key}, None),
        ("unknown route", "GET", "/api/v1/no-such-route", {}, None),
        ("bad token", "GET", lookup, {"Authorization": "Bearer not-a-valid-token"}, None),
        ("missing scope", "GET", lookup, {"X-API-Key": scopeless_key}, None),
        (
            "malformed JSON body",
            "POST",
            "/api/v1/clients/resolve",
            {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            '{"document": "123',
        ),
    ]
    statuses = {
        name: httpx.request(method, f"{gw.url}{path}", headers=headers, content=body).status_code
        for name, method, path, headers, body in cases
    }
    runs: dict[str, list[wrk.WrkResult]] = {name: [] for name, *_ in cases}
    ratios: dict[str, list[float]] = {name: [] for name, *_ in cases[1:]}
    # The server's own share of a body: the bare app on the same server, a GET beside a POST
    # of the same malformed body that it reads (a GET lookup reads none).
    malformed = cases[-1][4]
    bare_get = wrk.request_script("GET", "/api/v1/clients/by-document/1", {})
    bare_post = wrk.request_script("POST", "/read", {"Content-Type": "application/json"}, malformed)
    body_costs: list[float] = []
    base_name, *_, base_headers, _ = cases[0]
    base_script = wrk.request_script("GET", lookup, base_headers)
    for round_ in range(ROUNDS):
        for name, method, path, headers, body in cases[1:]:
            # Each case right beside its own JWT lookup, first one then the other by turns.
            script = wrk.request_script(method, path, headers, body)
            pair = [(base_name, base_script), (name, script)]
            got = {
                which: wrk.wrk(gw, text, SECONDS, connections)
                for which, text in (pair if round_ % 2 == 0 else pair[::-1])
            }
            runs[name].append(got[name])
            runs[base_name].append(got[base_name])
            ratios[name].append(got[name].cpu_us / got[base_name].cpu_us)
        got_bare = wrk.wrk(bare, bare_get, SECONDS, connections).cpu_us
        posted = wrk.wrk(bare, bare_post, SECONDS, connections).cpu_us
        body_costs.append(posted - got_bare)
    base = wrk.median(runs[base_name]).cpu_us
    lines = []
    for name, *_ in cases:
        r = wrk.median(runs[name])
        if name == base_name:
            target = ""
            shown = 1.0
        else:
            limit = 1.03 if name == "cached lookup, API key" else 1.0
            shown = statistics.median(ratios[name])
            spread = f"rounds {min(ratios[name]):.2f}-{max(ratios[name]):.2f}"
            target = f"; {spread}; {wrk.check(f'target <= {limit:.2f}x', shown <= limit)}"
        lines.append(
            f"    {name:22} {statuses[name]}  {r.cpu_us:6.1f} us of server CPU a request, "
            f"{shown:.2f}x the cached lookup ({r.rps:.0f} req/s{target})"
        )
    # The 422 with the server's own read of the body taken off, round by round.
    net = statistics.median(
        (r.cpu_us - cut) / (r.cpu_us / ratio)
        for r, ratio, cut in zip(runs[cases[-1][0]], ratios[cases[-1][0]], body_costs, strict=True)
    )
    lines.append(
        f"    the server's own cost of reading that body (bare Starlette on {server}, POST "
        f"reading it beside a GET): {statistics.median(body_costs):+.1f} us a request; the 422 "
        f"without it: {net:.2f}x the cached lookup"
    )
    lines.append(f"    (cached lookup with the JWT, median of the rounds: {base:.1f} us)")
    return lines
