"""Simulator settings: the start-up config and the runtime-mutable response variants."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

from isp_gateway.simulator.faults import Faults

TicketLabels = Literal["label", "number", "digit_string"]
AnswersShape = Literal["list", "object"]
FechaCorte = Literal["mixed", "dmy", "iso"]
PrecioPlan = Literal["mixed", "real"]
Money = Literal["string", "number"]

# Each variant's values, its default first (the simulator's flags offer the same).
CHOICES: dict[str, tuple[Any, ...]] = {
    "ticket_labels": ("label", "number", "digit_string"),
    "answers": ("list", "object"),
    "fecha_corte": ("mixed", "dmy", "iso"),
    "phone_separators": (True, False),
    "precio_plan": ("mixed", "real"),
    "money": ("string", "number"),
}


@dataclass
class Variants:
    """Which of the upstream's observed shapes to serve; mutable at runtime.

    - ``ticket_labels``: ticket ``estado``/``prioridad`` as labels ("Nuevo", "Alta"), numbers
      (1, 3) or digit strings ("1", "3").
    - ``answers``: ``respuestas`` on the ticket detail as a list, or one object (the latest
      answer, null when there is none).
    - ``fecha_corte``: each client's stored format ("mixed": D/MM/YYYY and ISO both occur),
      or all "dmy" (5/03/2026), or all "iso" (2026-03-05).
    - ``phone_separators``: when off, each ``telefono`` holds only its first number.
    - ``precio_plan``: "mixed" serves the stored values ("0.00" and "" among real prices);
      "real" replaces those with the plan's price.
    - ``money``: ``saldo``, ``precio_plan`` and a plan detail's ``precio`` as decimal strings
      ("40000.00", the usual) or as JSON numbers (40000.0; an empty price becomes null).
    """

    ticket_labels: TicketLabels = "label"
    answers: AnswersShape = "list"
    fecha_corte: FechaCorte = "mixed"
    phone_separators: bool = True
    precio_plan: PrecioPlan = "mixed"
    money: Money = "string"

    def reset(self) -> None:
        for spec in fields(self):
            setattr(self, spec.name, getattr(Variants(), spec.name))

    def update(self, data: dict[str, Any]) -> None:
        """Apply a partial update; unknown names or values raise ValueError, nothing applied."""
        checked = dict(data)
        reset = checked.pop("reset", False)
        for name, value in checked.items():
            if name not in CHOICES:
                raise ValueError(f"unknown variant {name!r}")
            wants_bool = name == "phone_separators"
            if value not in CHOICES[name] or isinstance(value, bool) != wants_bool:
                raise ValueError(f"{name} must be one of {list(CHOICES[name])}")
        if reset:
            self.reset()
        for name, value in checked.items():
            setattr(self, name, value)

    def as_dict(self) -> dict[str, Any]:
        return {spec.name: getattr(self, spec.name) for spec in fields(self)}

    def client_key(self) -> tuple[str, bool, str, str]:
        """The variants that change client rows (the row cache is keyed on them)."""
        return (self.fecha_corte, self.phone_separators, self.precio_plan, self.money)


@dataclass
class SimulatorConfig:
    """How to build and run one simulator instance."""

    api_key: str
    clients: int = 200
    seed: int = 1
    data_file: Path | None = None
    tickets: int = 300
    # Append the generated data's answer cases (dataset.add_answer_cases): a document and a
    # phone shared by two services, a suspended customer owing nothing.
    answer_cases: bool = False
    # Requests for a larger page get this many rows, like the account that capped at 300.
    max_page_size: int = 1000
    # DRF's PAGE_SIZE: what a list answers when the request has no ``limit``.
    default_page_size: int = 10
    # Seconds a ping task stays in PROCESS before its result is final.
    ping_duration: float = 3.0
    # The account's time zone: the upstream writes ticket times as local times in it
    # (UPSTREAM.md), like the gateway's TIMEZONE.
    timezone: str = "America/Bogota"
    # Routers in a general outage from the start (router id → `falla_general_descripcion`);
    # the /_sim/routers control endpoint raises and clears them at runtime.
    outages: dict[int, str] = field(default_factory=dict)
    # "object": client rows carry `router {id, nombre}`; "absent": no `router` key (accounts
    # that do not expose it). Also switchable at runtime through /_sim/routers.
    client_router: str = "object"
    faults: Faults = field(default_factory=Faults)
    variants: Variants = field(default_factory=Variants)
