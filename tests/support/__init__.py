"""Test helpers shared by every test package, one module a job:

- `waiting`: wait on a condition (`wait_until`), not for a fixed time;
- `tools`: skip a test whose system tool is missing (`needs`);
- `app_server`: any ASGI app on a real loopback port;
- `processes`: `isp-gateway serve` (or any server, or a CLI run) as a real process;
- `ports`: loopback ports for the servers started by number;
- `redis_servers`: a throwaway Redis (alone, or a master with replicas and sentinels);
- `stores`: the store a test runs on (memory or Redis);
- `bodies` and `datasets`: what the service answers and takes, as the tests write it;
- `build_once`: what every test process would otherwise build again (an OpenAPI document,
  a TLS context).

Each is imported from here: `from tests.support import wait_until`."""

from tests.support.app_server import run_server
from tests.support.bodies import assert_refused, error_body, tool_call
from tests.support.build_once import memoize_openapi, share_default_ssl_context
from tests.support.datasets import client_row, data_file_of, write_dataset
from tests.support.ports import free_port
from tests.support.processes import (
    Serving,
    base_env,
    default_sigint,
    run_cli,
    serve_args,
    server_process,
    serving,
    serving_workers,
    wait_for,
    wait_ready,
)
from tests.support.redis_servers import (
    SENTINEL_MASTER,
    SETTLE_PROBE,
    RedisSentinel,
    RedisServer,
    SentinelGroup,
)
from tests.support.stores import (
    RUN,
    delete_keys,
    emptied_redis,
    memory_or_redis,
    memory_or_redis_store,
    redis_db_url,
    redis_store_on,
)
from tests.support.tools import missing_tool, needs, tool_or_skip, tool_path
from tests.support.waiting import (
    WAIT_SECONDS,
    Errors,
    copy_age,
    wait_for_age,
    wait_for_fresh_window,
    wait_until,
    wait_until_async,
)

__all__ = [
    "RUN",
    "SENTINEL_MASTER",
    "SETTLE_PROBE",
    "WAIT_SECONDS",
    "Errors",
    "RedisSentinel",
    "RedisServer",
    "SentinelGroup",
    "Serving",
    "assert_refused",
    "base_env",
    "client_row",
    "copy_age",
    "data_file_of",
    "default_sigint",
    "delete_keys",
    "emptied_redis",
    "error_body",
    "free_port",
    "memoize_openapi",
    "memory_or_redis",
    "memory_or_redis_store",
    "missing_tool",
    "needs",
    "redis_db_url",
    "redis_store_on",
    "run_cli",
    "run_server",
    "serve_args",
    "server_process",
    "serving",
    "serving_workers",
    "share_default_ssl_context",
    "tool_call",
    "tool_or_skip",
    "tool_path",
    "wait_for",
    "wait_for_age",
    "wait_for_fresh_window",
    "wait_ready",
    "wait_until",
    "wait_until_async",
    "write_dataset",
]
