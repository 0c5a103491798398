"""/docs and /redoc work on a machine without outside access, in a real browser.

Debian's Chromium, headless, driven by Playwright with `executable_path` (Playwright's own
browser download is never used). Every request the pages make is intercepted: one that is not
to the gateway's loopback address is recorded and aborted, and the test fails if any was made.
(ReDoc's bundle asks for a logo on a CDN; the pages' Content-Security-Policy stops the browser
before any request, so none reaches the network, nor this interception.)
Skipped, with the package to install, where `chromium` is not (`.ci/run` installs it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, Route, expect, sync_playwright

from tests.conftest import PASSWORD, USERNAME, Gateway, Simulator
from tests.support import needs, tool_path

CHROMIUM = tool_path("chromium")
pytestmark = needs("chromium")
DOCUMENT = re.compile(r"[A-Za-z0-9]{3,20}")
TIMEOUT_MS = 60_000  # generous: the machine is shared and the Swagger bundle is 1.5 MB
expect.set_options(timeout=TIMEOUT_MS)


@pytest.fixture
def browser() -> Iterator[Browser]:
    assert CHROMIUM is not None
    with sync_playwright() as driver:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        browser = driver.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            yield browser
        finally:
            browser.close()


def offline_page(browser: Browser, gateway: Gateway) -> tuple[Page, list[str]]:
    """A page whose requests may only go to the gateway; the others are listed, not sent."""
    outside: list[str] = []
    own_host = urlsplit(gateway.url).netloc

    def guard(route: Route) -> None:
        url = route.request.url
        if url.startswith(("data:", "blob:")) or urlsplit(url).netloc == own_host:
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)

    page.route("**/*", guard)
    return page, outside


def a_document(simulator: Simulator) -> str:
    for row in simulator.state.dataset.clients:
        document = str(row.get("cedula") or "")
        if DOCUMENT.fullmatch(document):
            return document
    raise AssertionError("the simulator has no client with a valid document")


def test_docs_authorize_and_try_a_lookup_offline(
    browser: Browser, simulator: Simulator, gateway: Gateway
) -> None:
    document = a_document(simulator)
    page, outside = offline_page(browser, gateway)
    page.goto(f"{gateway.url}/docs")

    # Authorize as the README says: username and password in the dialog.
    page.locator("button.authorize").first.click()
    dialog = page.locator(".modal-ux")
    # The dialog holds one form per scheme (the password flow and the API key); this one is
    # the password flow's.
    password_form = dialog.locator(".auth-container", has_text="OAuth2PasswordBearer")
    password_form.locator("#oauth_username").fill(USERNAME)
    password_form.locator("#oauth_password").fill(PASSWORD)
    password_form.locator("button.authorize").click()
    # The form shows "Authorized" and a Logout button once the token request succeeded.
    expect(password_form.locator("button", has_text="Logout")).to_be_visible()
    expect(password_form).to_contain_text("Authorized")
    password_form.locator("button.btn-done").click()

    # Try it out on the by-document lookup.
    operation = page.locator(".opblock", has_text="/api/v1/clients/by-document/{document}")
    operation.locator(".opblock-summary").click()
    operation.locator("button.try-out__btn").click()
    operation.locator('input[placeholder="document"]').fill(document)
    operation.locator("button.execute").click()
    # The server response panel: status 200 and the envelope with `client_found`.
    answer = operation.locator(".live-responses-table tbody .response").first
    expect(answer.locator(".response-col_status")).to_contain_text("200")
    expect(answer.locator(".response-col_description")).to_contain_text('"client_found"')
    expect(answer.locator(".response-col_description")).to_contain_text(document)
    assert outside == []


def test_redoc_renders_offline(browser: Browser, gateway: Gateway) -> None:
    page, outside = offline_page(browser, gateway)
    page.goto(f"{gateway.url}/redoc")
    # Not a blank page: ReDoc drew the API's title and its operations.
    expect(page.get_by_role("heading", name=re.compile("ISP Integration API"))).to_be_visible()
    expect(page.get_by_text("/api/v1/clients/by-document/{document}").first).to_be_attached()
    assert outside == []
