"""What every feature service is built from: the long-lived parts the lifespan owns.

`services.py` builds one `Parts` and hands it to each service, next to the sibling services
that one uses (named, so the graph stays explicit). A service keeps only the parts it reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from isp_gateway.kit.cache import Lists
    from isp_gateway.kit.recorder import Recorder
    from isp_gateway.kit.stopping import Stopping
    from isp_gateway.kit.storage import Store
    from isp_gateway.settings import Settings
    from isp_gateway.upstream.gateway import UpstreamGateway


@dataclass(frozen=True, slots=True)
class Parts:
    settings: Settings
    store: Store
    gateway: UpstreamGateway
    # The whole lists kept warm are made through it (kit/cache.py).
    lists: Lists
    # The audit as the features see it (kit/recorder.py).
    audit: Recorder
    # Set once this worker is asked to stop (kit/stopping.py).
    stopping: Stopping
