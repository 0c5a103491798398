"""Shared state behind one Protocol: memory now, Redis when REDIS_URL or REDIS_SENTINELS is
set."""

from isp_gateway.kit.storage import LockTimeout, Store
from isp_gateway.store.memory import MemoryStore

__all__ = ["LockTimeout", "MemoryStore", "Store"]
