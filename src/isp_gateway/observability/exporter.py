"""`/metrics` on its own port (METRICS_PORT, issue 21), off the public API port.

Every worker listens on METRICS_HOST:METRICS_PORT with SO_REUSEPORT, so the kernel hands
each scrape to one of them, and the one that answers renders the samples of every worker
(`Metrics.render`, multiprocess mode), exactly as `GET /metrics` on the API port does. Its
gauges read from the shared store are set by that worker's app, which is why the port is
served by the workers rather than by the parent process (which has no app and no store).

The server is as small as a scrape needs: one request per connection (`Connection: close`),
`GET` or `HEAD /metrics`, 404 for any other path, 405 for any other method.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from prometheus_client import CONTENT_TYPE_LATEST

from isp_gateway.observability.metrics import Metrics

log = logging.getLogger("isp_gateway.metrics")

PATH = "/metrics"
# A scraper sends its request at once; a connection that does not is dropped.
READ_SECONDS = 10.0
# The request line and headers; a scrape's are a few hundred bytes.
MAX_HEAD_BYTES = 16384
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
_REASONS[500] = "Internal Server Error"


class MetricsExporter:
    def __init__(self, metrics: Metrics, server: asyncio.Server) -> None:
        self.metrics = metrics
        self.server = server

    async def aclose(self) -> None:
        self.server.close()
        await self.server.wait_closed()


async def serve_metrics(metrics: Metrics, host: str, port: int) -> MetricsExporter:
    """Listen on host:port (shared with this app's sibling workers); the lifespan closes it."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await _answer(metrics, reader, writer)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the scraper went away or never asked: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    server = await asyncio.start_server(answer, host, port, reuse_port=True, limit=MAX_HEAD_BYTES)
    log.info("metrics at http://%s:%d%s", host, port, PATH)
    return MetricsExporter(metrics, server)


async def _answer(
    metrics: Metrics, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_SECONDS)
    except asyncio.LimitOverrunError:
        await _respond(writer, 400, b"request head too large\n")
        return
    method, _, rest = head.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
    path = rest.partition(" ")[0].partition("?")[0]
    if path != PATH:
        await _respond(writer, 404, b"not found; metrics are at /metrics\n")
    elif method not in ("GET", "HEAD"):
        await _respond(writer, 405, b"method not allowed\n", {"Allow": "GET, HEAD"})
    else:
        try:
            body = await metrics.render()
        except Exception:
            log.exception("metrics: the scrape could not be rendered")
            await _respond(writer, 500, b"internal error\n")
            return
        headers = {"Content-Type": CONTENT_TYPE_LATEST}
        await _respond(writer, 200, body, headers, send_body=method == "GET")


async def _respond(
    writer: asyncio.StreamWriter,
    status: int,
    body: bytes,
    headers: dict[str, str] | None = None,
    *,
    send_body: bool = True,
) -> None:
    lines = [f"HTTP/1.1 {status} {_REASONS[status]}"]
    fields = {"Content-Type": "text/plain; charset=utf-8", **(headers or {})}
    fields.update({"Content-Length": str(len(body)), "Connection": "close"})
    lines += [f"{name}: {value}" for name, value in fields.items()]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    if send_body:
        writer.write(body)
    await writer.drain()
