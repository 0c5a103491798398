"""The demo banner's money lines (cli/demo.py, docs/payments.md "Try them from /docs") work
as written, against the demo's own data: verify the named service and promise, verify the
other and report."""

from __future__ import annotations

import re

from isp_gateway.cli.demo import _demo_data_lines
from tests.conftest import StartGateway, StartSimulator
from tests.payments.conftest import day, pdf_file, ready, report_fields, verification_id

DEMO_CLIENTS, DEMO_SEED = 2000, 1


def test_the_banner_names_two_debtors_whose_flows_work(
    start_simulator: StartSimulator, start_gateway: StartGateway
) -> None:
    banner = "\n".join(_demo_data_lines(DEMO_CLIENTS, DEMO_SEED))
    promised = re.search(r"POST /api/v1/clients/(\d+)/payment-promise", banner)
    reported = re.search(r"POST /api/v1/clients/(\d+)/payment-reports", banner)
    assert promised and reported, banner
    sim = start_simulator(clients=DEMO_CLIENTS, seed=DEMO_SEED, answer_cases=True)
    gw = start_gateway(sim.url)
    ready(gw)
    for match in (promised, reported):
        sid = int(match.group(1))
        record = gw.get(f"/api/v1/clients/by-service-id/{sid}").json()["data"]
        body = {
            "name": record["name"],
            "address": record["address"],
            "internet_plan_name": record["internet_plan_name"],
        }
        vid = verification_id(gw, sid, statement=body)
        headers = {"X-Verification-Id": vid}
        if match is promised:
            answer = gw.post(
                match.group(0).split(" ", 1)[1], json={"until": day(3)}, headers=headers
            )
            assert answer.status_code == 201, answer.text
        else:
            method = gw.get("/api/v1/payment-methods").json()["data"][0]["id"]
            answer = gw.post(
                match.group(0).split(" ", 1)[1],
                data=report_fields(payment_method_id=method),
                files={"receipt": ("recibo.pdf", pdf_file(), "application/pdf")},
                headers=headers,
            )
            assert answer.status_code == 202, answer.text
