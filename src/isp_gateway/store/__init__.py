"""Shared state behind one Protocol: memory now, Redis when REDIS_URL or REDIS_SENTINELS is
set."""

from isp_gateway.kit.storage import Bound, LockTimeout, Rule, Series, Store, rule_holds
from isp_gateway.store.memory import MemoryStore

__all__ = ["Bound", "LockTimeout", "MemoryStore", "Rule", "Series", "Store", "rule_holds"]
