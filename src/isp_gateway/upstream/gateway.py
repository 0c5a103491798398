"""The one piece of code that speaks HTTP to the WispHub-compatible upstream.

It owns the auth header, trailing slashes, pagination, the rate budget and the mapping of
every transport failure to a typed error. Feature modules in this package (`clients.py`,
`tickets.py`, `plans.py`, `ping.py`) build on `request`/`get_json`/`get_all_pages` and turn
the Spanish records into our models; nothing above this package sees WispHub's field names.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any, Protocol, TypeVar

import httpx

from isp_gateway.kit.actions import Action
from isp_gateway.kit.calls import count_call, report_page
from isp_gateway.kit.errors import (
    StoreUnavailable,
    UpstreamRateLimited,
    UpstreamRejected,
    UpstreamUnauthorized,
    UpstreamUnavailable,
)
from isp_gateway.settings import Settings
from isp_gateway.upstream.budget import RateBudget

log = logging.getLogger("isp_gateway.upstream")

JSON = Any
T = TypeVar("T")

# Background pages retried after a transient failure before a whole-list load gives up.
PAGE_ATTEMPTS = 4


class UpstreamUnreached(UpstreamUnavailable):
    """The request never left: the connection was refused or could not be made in time, or
    no pooled connection came free. Nothing reached the upstream, so a write was not done
    (every other UpstreamUnavailable of a write may have followed its doing)."""


class UpstreamNoAnswer(UpstreamUnavailable):
    """The request was sent and no answer came: it timed out, or the connection dropped. A
    write may still be carried out after this by a slow backend."""


class Observer(Protocol):
    """Where each upstream answer is counted (observability/metrics.py)."""

    def observe_upstream(self, method: str, path: str, outcome: str, seconds: float) -> None: ...


def build_http_client(settings: Settings) -> httpx.AsyncClient:
    """One pooled client for the service's lifetime."""
    key = settings.UPSTREAM_NET_KEY.get_secret_value()
    return httpx.AsyncClient(
        base_url=settings.UPSTREAM_NET_HOST + "/",
        headers={"Authorization": f"Api-Key {key}", "Accept": "application/json"},
        timeout=httpx.Timeout(settings.UPSTREAM_TIMEOUT_SECONDS),
        # A redirected POST loses its body; we always send the trailing slash instead.
        follow_redirects=False,
        limits=httpx.Limits(max_connections=50, max_keepalive_connections=20),
    )


def _retry_after(response: httpx.Response) -> float:
    try:
        return max(1.0, float(response.headers.get("Retry-After", "60")))
    except ValueError:
        return 60.0


def _outcome(status: int) -> str:
    """The metrics outcome of an upstream answer other than a 4xx about the request (those
    are `rejected`, e.g. an unknown ticket: not a failure of the upstream)."""
    if 200 <= status < 300:
        return "ok"
    if status in (401, 403):
        return "unauthorized"
    if status == 429:
        return Action.RATE_LIMITED
    return "error"


class UpstreamGateway:
    def __init__(
        self,
        settings: Settings,
        http: httpx.AsyncClient,
        budget: RateBudget,
        metrics: Observer | None = None,
    ) -> None:
        self.settings = settings
        self.http = http
        self.budget = budget
        self.metrics = metrics
        # The last answer about our key: True after a 401/403, False again after any 2xx
        # (what /ready reports as `checks.upstream`).
        self.key_refused = False
        # When (time.time) that answer came: /ready shares the newest of every worker's.
        self.key_answered_at = 0.0
        # Shares a change of that answer with the other workers (services.py), and whether
        # the shared answer was a refusal when /ready last read it.
        self.share_key_answer: Callable[[list[Any]], Awaitable[None]] | None = None
        self.key_refused_shared = False
        # Until when (time.monotonic) the upstream's last 429 asked us to wait.
        self.rate_limited_until = 0.0

    async def _share_key_answer(self) -> None:
        if self.share_key_answer is None:
            return
        # Unshared while the store is away: /ready shares it once the store answers.
        with contextlib.suppress(StoreUnavailable, TimeoutError):
            await self.share_key_answer([self.key_answered_at, self.key_refused])

    async def background_wait(self) -> float:
        """How long background work waits for the budget now (kit/deadline.py asks it for a
        request waiting on a load the budget may hold)."""
        return await self.budget.background_wait()

    def rate_limited_for(self) -> float:
        """Seconds the upstream's last Retry-After still asks us to wait (0 when none)."""
        return max(0.0, self.rate_limited_until - time.monotonic())

    def _count(self, method: str, url: str, outcome: str, started: float) -> None:
        if self.metrics is not None:
            self.metrics.observe_upstream(method, url, outcome, time.perf_counter() - started)

    @staticmethod
    def _path(path: str) -> str:
        path = path.lstrip("/")
        if not path.endswith("/"):
            path += "/"  # a missing slash answers 301 upstream
        return path

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | list[tuple[str, Any]] | None = None,
        json: JSON = None,
        data: dict[str, Any] | None = None,
        files: dict[str, Any] | None = None,
        content: bytes | AsyncIterable[bytes] | None = None,
        headers: dict[str, str] | None = None,
        background: bool = False,
        retry_refused: bool | None = None,
        timeout: float | None = None,
    ) -> httpx.Response:
        """Send one request and return a 2xx response, or raise a typed upstream error.

        A refused connection, or one the upstream dropped without an answer, is retried
        once for reads only: a write that may have reached the upstream is never repeated
        (it could create a second ticket). `timeout`, when
        given, replaces UPSTREAM_TIMEOUT_SECONDS for this call (the time a request has left).
        `content` is a raw body (an async iterable is streamed: chunked, unless `headers`
        give its Content-Length), sent with `headers` beside the client's own; such a body
        is read once, so it is never retried either. A failure before anything was sent
        raises `UpstreamUnreached`.
        """
        url = self._path(path)
        if retry_refused is None:
            retry_refused = method in ("GET", "HEAD") and content is None
        attempts = 2 if retry_refused else 1
        for attempt in range(attempts):
            await self.budget.acquire(background=background)
            started = time.perf_counter()
            count_call()
            try:
                response = await self.http.request(
                    method,
                    url,
                    params=params,
                    json=json,
                    data=data,
                    files=files,
                    content=content,
                    headers=headers,
                    timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
                )
                break
            except httpx.ConnectError as exc:
                self._count(method, url, "error", started)
                if attempt + 1 < attempts:
                    await asyncio.sleep(0.05)
                    continue
                log.warning(
                    "upstream %s %s: connection failed (%s)", method, url, type(exc).__name__
                )
                raise UpstreamUnreached() from None
            except httpx.TimeoutException as exc:
                self._count(method, url, "timeout", started)
                # A timed-out call is not retried: the request would outlive the bot's window.
                log.warning("upstream %s %s: timed out", method, url)
                if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
                    raise UpstreamUnreached() from None
                raise UpstreamNoAnswer() from None
            except httpx.RemoteProtocolError as exc:
                self._count(method, url, "error", started)
                # Most often a kept-alive connection the upstream closed as it was reused
                # ("disconnected without sending a response"): a read is asked again once,
                # on a new connection, rather than answered 502. A write never is.
                if attempt + 1 < attempts:
                    continue
                log.warning("upstream %s %s: %s", method, url, type(exc).__name__)
                raise UpstreamNoAnswer() from None
            except httpx.HTTPError as exc:
                self._count(method, url, "error", started)
                log.warning("upstream %s %s: %s", method, url, type(exc).__name__)
                raise UpstreamNoAnswer() from None
        status = response.status_code
        if not 400 <= status < 500 or status in (401, 403, 429):
            self._count(method, url, _outcome(status), started)
        if 200 <= status < 300:
            changed = self.key_refused or self.key_refused_shared
            self.key_refused = False
            self.key_answered_at = time.time()
            if changed:
                await self._share_key_answer()
            self.rate_limited_until = 0.0
            return response
        if status in (401, 403):
            self.key_refused = True
            self.key_answered_at = time.time()
            await self._share_key_answer()
            # Never log the key or the body (a proxy page may echo headers).
            log.error("upstream %s %s: our API key was rejected (%d)", method, url, status)
            raise UpstreamUnauthorized()
        if status == 429:
            retry_after = _retry_after(response)
            self.rate_limited_until = time.monotonic() + retry_after
            log.warning("upstream %s %s: rate limited, retry after %.0fs", method, url, retry_after)
            raise UpstreamRateLimited(retry_after)
        if status >= 500 or 300 <= status < 400:
            log.warning("upstream %s %s: status %d", method, url, status)
            raise UpstreamUnavailable()
        try:
            body: Any = response.json()
        except ValueError:
            body = None
        if status == 404 and not isinstance(body, dict):
            # DRF answers an unknown object with JSON {"detail": ...}. A 404 page in HTML
            # means the path itself is unknown there (a wrong UPSTREAM_NET_HOST, a proxy):
            # the upstream is unusable, which must never read as "that customer/ticket
            # does not exist".
            log.error("upstream %s %s: 404 without a JSON body (is the host right?)", method, url)
            self._count(method, url, "error", started)
            raise UpstreamUnavailable()
        self._count(method, url, "rejected", started)
        raise UpstreamRejected(status, body)

    async def get_json(
        self,
        path: str,
        params: dict[str, Any] | list[tuple[str, Any]] | None = None,
        *,
        background: bool = False,
    ) -> JSON:
        response = await self.request("GET", path, params=params, background=background)
        return self.decode(response)

    @staticmethod
    def decode(response: httpx.Response) -> JSON:
        try:
            return response.json()
        except ValueError:
            log.warning("upstream %s: answer is not JSON", response.request.url.path)
            raise UpstreamUnavailable() from None

    async def get_page(
        self,
        path: str,
        params: dict[str, Any],
        limit: int,
        offset: int,
        *,
        background: bool = False,
    ) -> tuple[int | None, bool, list[dict[str, Any]]]:
        """One page: (count, has_next, results). We rebuild pages from limit/offset and
        never follow `next`, which may name the wrong scheme.

        A background page that meets a 429 or a transient failure waits and is asked
        again: a refresh half-way through hundreds of pages pauses and resumes there
        instead of failing and starting over from the first page."""
        page_params = {**params, "limit": limit, "offset": offset}
        attempt = 0
        while True:
            try:
                body = await self.get_json(path, page_params, background=background)
                break
            except (UpstreamRateLimited, UpstreamUnavailable) as exc:
                attempt += 1
                if not background or attempt >= PAGE_ATTEMPTS:
                    raise
                if isinstance(exc, UpstreamRateLimited):
                    wait = exc.retry_after
                else:
                    first = self.settings.UPSTREAM_PAGE_RETRY_SECONDS
                    wait = min(30.0, first * 2.0 ** (attempt - 1))
                log.info("upstream %s: page at %d paused %.0fs before retrying", path, offset, wait)
                await asyncio.sleep(wait)
        if isinstance(body, list):  # an unpaginated answer: everything at once
            return len(body), False, [r for r in body if isinstance(r, dict)]
        if not isinstance(body, dict) or not isinstance(body.get("results"), list):
            log.warning("upstream %s: unexpected page shape", path)
            raise UpstreamUnavailable()
        count = body.get("count")
        results = [r for r in body["results"] if isinstance(r, dict)]
        return (count if isinstance(count, int) else None), bool(body.get("next")), results

    async def get_all_pages(
        self,
        path: str,
        params: dict[str, Any] | None = None,
        *,
        background: bool = False,
    ) -> list[dict[str, Any]]:
        """Every row of a paginated list (see `get_all_pages_as`)."""
        rows: list[dict[str, Any]] = []
        for page in await self.get_all_pages_as(path, list, params, background=background):
            rows.extend(page)
        return rows

    async def get_all_pages_as(
        self,
        path: str,
        transform: Callable[[list[dict[str, Any]]], T],
        params: dict[str, Any] | None = None,
        *,
        background: bool = False,
    ) -> list[T]:
        """Every page of a paginated list, each turned by `transform` as it arrives (a large
        list's raw rows are then never all held at once): the first page tells the count,
        the rest are fetched in bounded parallel, then paging goes on until a page comes
        back empty. Fewer rows than the first page's count raise UpstreamUnavailable."""
        params = dict(params or {})
        size = self.settings.UPSTREAM_PAGE_SIZE
        count, has_next, first = await self.get_page(path, params, size, 0, background=background)
        read = len(first)
        out = [transform(first)]
        # Without a count (an unpaginated answer, an upstream that omits it) the total is
        # what is known so far.
        await report_page(read, count if count is not None else read)
        if not has_next or not first:
            self.check_whole(path, count, read)
            return out
        # The upstream may cap the page size below what we asked for.
        step = len(first)
        offsets = list(range(step, count, step)) if count is not None else []
        if offsets:
            sem = asyncio.Semaphore(self.settings.UPSTREAM_PARALLEL_PAGES)

            async def fetch(offset: int) -> tuple[bool, int, T]:
                async with sem:
                    _, nxt, page = await self.get_page(
                        path, params, step, offset, background=background
                    )
                    done = transform(page)
                    await report_page(len(page), None)
                    return nxt, len(page), done

            # A task group, not gather: when one page fails or the load is cancelled (a
            # shutdown), the other pages are cancelled and awaited, never left running
            # against a client that is about to close.
            try:
                async with asyncio.TaskGroup() as group:
                    tasks = [group.create_task(fetch(o)) for o in offsets]
            except ExceptionGroup as failed:
                raise failed.exceptions[0] from None  # the callers map our typed errors
            pages = [task.result() for task in tasks]
            out.extend(page for _, _, page in pages)
            read += sum(rows for _, rows, _ in pages)
            offset = offsets[-1] + step
            more = pages[-1][0] and pages[-1][1] > 0
        else:
            offset, more = step, True
        # The list may have grown while we read it (or the count was missing).
        while more:
            _, has_next, page = await self.get_page(
                path, params, step, offset, background=background
            )
            read += len(page)
            out.append(transform(page))
            await report_page(len(page), None)
            offset += step
            more = has_next and bool(page)
        self.check_whole(path, count, read)
        return out

    @staticmethod
    def check_whole(path: str, count: int | None, read: int) -> None:
        """A list is whole only when the rows read reach the first page's `count`. A short
        read (a page that ended early, an empty page, `next: null` too soon) is a failed
        read: published, it would say "not found" or "owes nothing" about rows never seen.
        More rows than counted is a list that grew while we read it (an insertion shifts
        rows forward, it never skips one): whole. Without a count there is nothing to
        check against (an unpaginated answer counts itself)."""
        if count is not None and read < count:
            log.warning("upstream %s: short read, %d rows of %d announced", path, read, count)
            raise UpstreamUnavailable()
