"""The identity policy (CALLERS.md 6): how many facts a verify or resolve needs.

`spec` (IDENTITY_POLICY's default): the spec's rule, at least 3 of the 4 fields.
`strict` (REQUIRE_VERIFICATION, MCP always): the plan's name and its price are public (the
plan catalogue answers both), so together they are ONE fact; 3 facts are needed of which at
least 2 are not public (name and address). With one plan fact that means all three of the
name, the address and the plan (its name or its price). Fewer: 400
`client_verification_failed` with `data.missing`, the facts that would complete it.
"""

from __future__ import annotations

from typing import Any

from isp_gateway.kit import messages
from isp_gateway.kit.actions import Action
from isp_gateway.kit.errors import InvalidInput

SPEC_MIN_FIELDS = 3
PRIVATE_FACTS = ("name", "address")
PLAN_FIELDS = ("internet_plan_name", "internet_plan_price")
# In `missing`, the plan fact is named by its name field: what a person is asked for
# (its price completes it as well; the message says so).
PLAN_FACT = "internet_plan_name"

# Each fact in a person's words: its variant of `client_verification_failed` (kit/messages).
_SAID = {"name": "fact_name", "address": "fact_address", PLAN_FACT: "fact_plan"}


def missing_facts(given: dict[str, Any]) -> list[str]:
    """Under `strict`, the facts `given` lacks (in a fixed order), [] when it is enough."""
    missing = [fact for fact in PRIVATE_FACTS if fact not in given]
    if not any(field in given for field in PLAN_FIELDS):
        missing.append(PLAN_FACT)
    return missing


def missing_message(missing: list[str]) -> str:
    """A sentence naming what is missing, in words a person understands (never a field of
    the API), for the bot to say or an agent to read."""
    failed = Action.CLIENT_VERIFICATION_FAILED
    said = [messages.say(failed, _SAID[fact]) for fact in missing]
    both = messages.say(failed, "fact_and")
    listed = said[0] if len(said) == 1 else ", ".join(said[:-1]) + both + said[-1]
    return messages.say(failed, "missing", listed=listed)


def require_facts(given: dict[str, Any], *, strict: bool) -> None:
    """Raise the 400 of too few facts under the policy, before any upstream call."""
    if not strict:
        if len(given) < SPEC_MIN_FIELDS:
            raise InvalidInput(action=Action.CLIENT_VERIFICATION_FAILED, variant="few_fields")
        return
    missing = missing_facts(given)
    if missing:
        raise InvalidInput(
            missing_message(missing),
            action=Action.CLIENT_VERIFICATION_FAILED,
            variant="missing",
            data={"missing": missing},
        )
