"""Response models of the plan endpoints (spec 2.4, 4.14-4.15; DECISIONS.md "Plans").

The upstream module maps WispHub's records straight into these shapes, so they are shared.
"""

from __future__ import annotations

from isp_gateway.upstream.plans import Plan as InternetPlan
from isp_gateway.upstream.plans import PlanDetail as InternetPlanDetail

__all__ = ["InternetPlan", "InternetPlanDetail"]
