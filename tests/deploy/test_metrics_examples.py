"""deploy/prometheus.yml and deploy/alerts.yml (and the rules docs/operations.md shows) name
only metrics the gateway exports: a real gateway is scraped, and every series name in the rules'
expressions must be among what it exports (or `up`, which Prometheus adds to each target)."""

from __future__ import annotations

import re
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Gateway, Simulator, StartGateway
from tests.deploy.conftest import DEPLOY
from tests.support import wait_until

# What Prometheus itself records for each target.
PROMETHEUS_SERIES = {"up"}
# The series of a family of each type, beside the samples it has now: a labelled counter
# nobody has counted yet is exported as its HELP and TYPE lines only.
SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "info": ("_info",),
}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "group_left", "group_right"}
GROUPING = r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)"


def exported(gateway: Gateway) -> set[str]:
    response = gateway.client.get("/metrics")
    assert response.status_code == 200
    names = set()
    for family in text_string_to_metric_families(response.text):
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
        names |= {sample.name for sample in family.samples}
    return names


def series_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads, roughly: its identifiers once strings,
    label matchers, ranges and grouping label lists are gone, except calls and keywords."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    text = re.sub(r"\{[^}]*\}", "{}", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(GROUPING, "", text)
    names = set()
    for match in re.finditer(r"(?<![\w:.])[A-Za-z_:][\w:]*", text):
        if text[match.end() :].lstrip().startswith("("):
            continue  # a function or an aggregation
        if match.group().lower() not in KEYWORDS:
            names.add(match.group())
    return names


def rule_expressions(rules_file: Any) -> dict[str, str]:
    return {
        rule.get("alert") or rule["record"]: rule["expr"]
        for group in rules_file["groups"]
        for rule in group["rules"]
    }


def documented_rules() -> dict[str, str]:
    """The alert rules the documentation shows (docs/operations.md, "Alert rules"), from the
    YAML blocks that hold rule groups in README.md and docs/*.md."""
    root = DEPLOY.parent
    found: dict[str, str] = {}
    for page in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), re.S):
            parsed = yaml.safe_load(block)
            if isinstance(parsed, dict) and "groups" in parsed:
                name = page.relative_to(root)
                found |= {f"{name} {k}": v for k, v in rule_expressions(parsed).items()}
    return found


def test_series_parser() -> None:
    expr = (
        'histogram_quantile(0.95, sum by (instance, le) (rate(a_bucket{route!~"x|y(z)"}[5m])))'
        ' / on(instance) group_left b_total offset 5m > bool 2 and up{job="j"} == 0'
    )
    assert series_names(expr) == {"a_bucket", "b_total", "up"}


def test_the_examples_name_only_exported_metrics(gateway: Gateway) -> None:
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    assert config["rule_files"] == ["alerts.yml"]
    (job,) = config["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    # The replicas of deploy/nginx.conf's upstream, each scraped on its own.
    upstream = re.findall(r"^\s*server (\S+) ", (DEPLOY / "nginx.conf").read_text(), re.M)
    assert job["static_configs"][0]["targets"] == upstream
    documented = documented_rules()
    assert any(name.startswith("docs/operations.md ") for name in documented)
    rules = rule_expressions(yaml.safe_load((DEPLOY / "alerts.yml").read_text())) | documented
    names = exported(gateway)
    assert len(rules) > 10
    for alert, expr in rules.items():
        used = series_names(expr)
        assert used, f"{alert}: no metric found in {expr!r}"
        unknown = used - names - PROMETHEUS_SERIES
        assert not unknown, f"{alert} names metrics the gateway does not export: {unknown}"


def test_the_shipped_rules_hold_every_rule_the_docs_show() -> None:
    """docs/operations.md calls deploy/alerts.yml "a fuller set" of the rules it shows: each
    one it shows is shipped, with the same expression (WebhookBacklog was shown, not
    shipped: seen by the docs probe)."""
    shipped = rule_expressions(yaml.safe_load((DEPLOY / "alerts.yml").read_text()))
    for name, expr in documented_rules().items():
        alert = name.rsplit(" ", 1)[1]
        assert alert in shipped, f"{name} is not in deploy/alerts.yml"
        assert " ".join(shipped[alert].split()) == " ".join(expr.split()), name


# The routes whose answers wait on purpose, up to 25 s: a ping's result, a diagnose, and MCP,
# whose diagnose_connection tool waits as REST's diagnose does (default 20 s).
LONG_POLLS = {
    "/api/v1/ping/{task_id}/": ("GET", "/api/v1/ping/abc/"),
    "/api/v1/clients/{service_id}/diagnose": ("POST", "/api/v1/clients/1/diagnose?wait=0"),
    "/mcp": ("GET", "/mcp"),
}


def test_the_slow_answers_alert_leaves_every_long_poll_out(gateway: Gateway) -> None:
    """GatewaySlowAnswers left out the ping and diagnose routes but not /mcp, where an agent's
    diagnose_connection waits as long: agents diagnosing connections raised it."""
    for method, path in LONG_POLLS.values():
        gateway.client.request(method, path, headers=gateway.auth)
    text = gateway.client.get("/metrics").text
    bucket = r'isp_gateway_request_duration_seconds_bucket\{[^}]*route="([^"]+)"'
    routes = set(re.findall(bucket, text))
    assert set(LONG_POLLS) <= routes, routes
    rules = rule_expressions(yaml.safe_load((DEPLOY / "alerts.yml").read_text()))
    expr = rules["GatewaySlowAnswers"]
    (left_out,) = re.findall(r'route!~"([^"]+)"', expr)
    # PromQL's regular expressions match the whole value.
    for route in LONG_POLLS:
        assert re.fullmatch(left_out, route), route
    for route in ("/health", "/api/v1/tickets", "/api/v1/clients/by-document/{document}"):
        assert not re.fullmatch(left_out, route), route


def evaluate(expr: str, values: dict[str, float]) -> bool:
    """Whether an alert whose expression compares single series (joined by `and`) fires with
    these values: each selector replaced by its value, the rest read as Python."""
    text = " ".join(expr.split())
    for selector, value in values.items():
        text = text.replace(selector, repr(value))
    assert "{" not in text, text
    return bool(eval(text, {"__builtins__": {}}))  # noqa: S307 - numbers and operators only


def test_the_client_list_alert_leaves_a_large_list_on_its_plan_alone(
    simulator: Simulator, start_gateway: StartGateway
) -> None:
    """ClientListOld fired past 30 minutes whatever the plan, and a large ISP's client list is
    planned beyond that (operations.md: 200,000 clients every 38 minutes at the default
    budget): it fired on every cycle of a list refreshed as planned. A budget of 15 calls an
    hour plans this small list the same way."""
    gw = start_gateway(simulator.url, UPSTREAM_RATE_PER_HOUR=15, UPSTREAM_RATE_PER_MINUTE=15)

    def planned() -> float | None:
        text = gw.client.get("/metrics").text
        found = re.search(r'isp_gateway_refresh_interval_seconds\{resource="clients"\} (\S+)', text)
        return float(found.group(1)) if found else None

    interval = wait_until(planned, timeout=20, message="the clients' planned refresh") or 0.0
    assert interval > 1800
    expr = rule_expressions(yaml.safe_load((DEPLOY / "alerts.yml").read_text()))["ClientListOld"]
    age = 'isp_gateway_cache_age_seconds{resource="clients"}'
    every = 'isp_gateway_refresh_interval_seconds{resource="clients"}'
    # On plan: at most one interval old (and a load); two refreshes missed: old.
    assert not evaluate(expr, {age: interval + 60, every: interval})
    assert evaluate(expr, {age: 2 * interval + 60, every: interval})
    # The list of a small ISP (refreshed every 4 min) is old past 30 minutes, as before.
    assert evaluate(expr, {age: 1801, every: 240})
    assert not evaluate(expr, {age: 1799, every: 240})
