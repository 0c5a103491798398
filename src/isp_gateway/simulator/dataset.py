"""The simulator's data: generated deterministically from a seed, or loaded from a JSON file.

Data file format (every section optional except ``clients``)::

    {
      "clients": [ {...}, ... ],       # rows in the upstream list shape (GET /api/clientes/);
                                       # only "id_servicio" (int) is required, the rest is served
                                       # as given, extra keys included; "usuario" links
                                       # a client to its invoices (cliente.usuario)
      "plans": [ {"id": 1, "nombre": "PLAN 10MB", "tipo": "PPPOE",
                  "precio": "40000.00", "bajada": "10M", "subida": "2M"}, ... ],
                                       # tipo: PPPOE | SIMPLE QUEUE | PCQ; precio/bajada/subida
                                       # optional (they feed the detail endpoints)
      "plan_details": {"1": {"precio": "40000.00", "bajada": "10", "subida": "2"}},
                                       # optional, overrides the detail fields by plan id
      "tickets": [ {...}, ... ],       # rows in the upstream ticket shape; "estado" and
                                       # "prioridad" as numbers, digit strings or labels;
                                       # "servicio" a nested object or a bare service id;
                                       # optional "respuestas" (a list or one object)
      "staff": [ {"id": 11, "nombre": "Carlos Ruiz"}, ... ],
      "zones": [ {"id": 1, "nombre": "Norte"}, ... ],
      "invoices": [ {"id_factura": 5001, "cliente": {"usuario": "juan-perez@isp",
                     "nombre": "JUAN PEREZ"}, "total": "40000.00" or 40000,
                     "fecha_emision": "2026-03-01", "fecha_vencimiento": "2026-03-16",
                     "estado": 1}, ... ],
                                       # estado a number 1-5 or its label; total served as
                                       # given (a number or a decimal string)
      "payment_methods": [ {"id": 7, "nombre": "efectivo"}, ... ]
                                       # missing: the default four; [] for none
      "routers": [ {"id": 1, "nombre": "MK-NORTE"}, ... ]   # GET /api/router/
    }

Missing sections: ``plans`` and ``tickets`` default to empty; ``staff``, ``zones`` and ``routers``
are derived from the clients' ``tecnico``, ``zona`` and ``router`` objects. ``dump_dataset``
writes this format.

Generated data (``build_dataset``) is the same for the same ``(clients, seed, tickets)``:
Colombian names (accents, mostly upper case), unique cédulas of 6-10 digits, mobiles with
prefixes and several numbers per field, addresses with VDA/ B/ V/ VEREDA BARRIO prefixes,
5-15 zones (each zone one router), ~10 technicians, twelve plans of the three types. The two
zones with the lowest ids start at or above 3 active (state 1) tickets, the others below it,
so the gateway's default zone cap of 3 has both a blocked and a free zone to show.

Invoices (generated from their own seeded stream, dated relative to today): clients whose
bills are `Vencidas` owe two or three overdue invoices, `Pendiente de Pago` one not yet due,
`Pagadas` have one paid invoice; the first suspended client with overdue bills owes fourteen
(more than a default page of ten). Every client row also holds the private fields a real one
does (four passwords, `coordenadas`, `mac_cpe`), which the gateway must never pass on.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

Row = dict[str, Any]

TICKET_STATES = {1: "Nuevo", 2: "En Progreso", 3: "Resuelto", 4: "Cerrado"}
TICKET_PRIORITIES = {1: "Baja", 2: "Normal", 3: "Alta", 4: "Muy Alta"}
CLIENT_STATES = {1: "Activo", 2: "Suspendido", 3: "Cancelado", 4: "Gratis"}
# The detail route's labels; the list filters and serves the numbers.
INVOICE_STATES = {
    1: "Pendiente de Pago",
    2: "Pagada",
    3: "Cancelada",
    4: "En revisión",
    5: "Se Transfirio",
}
DEFAULT_PAYMENT_METHODS: list[dict[str, Any]] = [
    {"id": 7, "nombre": "efectivo"},
    {"id": 8, "nombre": "Transferencia Bancolombia"},
    {"id": 9, "nombre": "Nequi"},
    {"id": 12, "nombre": "PSE"},
]
DEPARTMENTS = ["Soporte Técnico", "Facturación", "Instalaciones", "Ventas"]

_FIRST_MALE = [
    "JOSÉ", "JUAN", "CARLOS", "LUIS", "JORGE", "ANDRÉS", "ÁLVARO", "JESÚS", "HERNÁN", "RAMÓN",
    "ÓSCAR", "SEBASTIÁN", "NICOLÁS", "MIGUEL", "DIEGO", "FABIÁN", "IVÁN", "JULIÁN", "MARTÍN",
    "CÉSAR", "EDGAR", "WILSON", "JHON", "FREDY", "HÉCTOR", "GERMÁN", "RUBÉN", "ELKIN",
]  # fmt: skip
_FIRST_FEMALE = [
    "MARÍA", "ANA", "LUZ", "SOFÍA", "VALENTINA", "ANGÉLICA", "MÓNICA", "DIANA", "ROCÍO", "INÉS",
    "LUCÍA", "MARTHA", "SANDRA", "PAOLA", "YOLANDA", "BEATRIZ", "GLORIA", "NATALIA", "CAROLINA",
    "ESPERANZA", "DORA", "LEIDY", "YURANY", "DAYANA", "MARLÉN", "ROSALBA", "NUBIA",
]  # fmt: skip
_SURNAMES = [
    "PÉREZ", "GÓMEZ", "RODRÍGUEZ", "MARTÍNEZ", "GARCÍA", "LÓPEZ", "HERNÁNDEZ", "GONZÁLEZ",
    "SÁNCHEZ", "RAMÍREZ", "TORRES", "DÍAZ", "VARGAS", "MORENO", "ROJAS", "JIMÉNEZ", "CASTRO",
    "ORTIZ", "RUIZ", "SUÁREZ", "MUÑOZ", "ÁLVAREZ", "ROMERO", "QUINTERO", "CÁRDENAS", "BELTRÁN",
    "GUTIÉRREZ", "OSPINA", "CASTAÑEDA", "PEÑA", "ZAPATA", "MEJÍA", "ARIAS", "RÍOS", "ACOSTA",
    "CARDONA", "VALENCIA", "BERNAL", "PATIÑO", "NÚÑEZ", "GIRALDO", "SALAZAR",
]  # fmt: skip
_PLACES = [
    "EL ROSAL", "LA ESPERANZA", "SAN JOSÉ", "LOS PINOS", "EL CARMEN", "SANTA ROSA",
    "LA PRADERA", "VILLA MARÍA", "EL PORVENIR", "SAN ANTONIO", "LA FLORIDA", "LAS BRISAS",
    "EL PARAÍSO", "BUENOS AIRES", "LA CAMPIÑA", "SAN JORGE", "EL TÁMBOR", "GUAYMARAL",
]  # fmt: skip
_ADDRESS_PREFIXES = ["VDA/", "B/", "V/", "VEREDA", "BARRIO"]
_ADDRESS_SUFFIXES = ["CASA 4", "LOTE 12", "MZ 3 CASA 7", "FINCA LA ESMERALDA", "SECTOR 2", ""]
_STREETS = ["CALLE", "CRA", "KR", "DG", "TV", "AV"]
_CITIES: list[tuple[str, list[str]]] = [
    ("Bogotá", ["Suba", "Usaquén", "Kennedy", "Engativá", "Bosa", "Fontibón"]),
    ("Medellín", ["Laureles", "Belén", "Robledo", "El Poblado"]),
    ("Cali", ["Siloé", "El Ingenio", "San Fernando"]),
    ("Bucaramanga", ["Cabecera", "La Concordia", "Provenza"]),
    ("Villavicencio", ["La Esperanza", "Porfía", "El Barzal"]),
    ("Zipaquirá", ["Centro", "San Jorge", "Barandillas"]),
    ("Chía", ["Fagua", "Tíquiza", "Bojacá"]),
    ("Cajicá", ["Chuntame", "Canelón", "Calahorra"]),
]
_ZONE_NAMES = [
    "Norte", "Sur", "Centro", "Oriente", "Occidente", "El Rosal", "La Esperanza", "San Jorge",
    "Guaymaral", "Fagua", "Canelón", "La Concordia", "El Barzal", "Siloé", "Laureles",
]  # fmt: skip
_STAFF = [
    "Carlos Ruiz", "Andrés Gómez", "Jhon Fredy Castaño", "Luis Ángel Pérez", "Diana Marcela Ríos",
    "Óscar Beltrán", "Wilson Peña", "Sebastián Muñoz", "Yurany Zapata", "Hernán Giraldo",
]  # fmt: skip
# Generated staff ids run from here, in `_STAFF` order: the same in every generated dataset,
# whatever the seed.
_FIRST_STAFF_ID = 11
STAFF_IDS = tuple(range(_FIRST_STAFF_ID, _FIRST_STAFF_ID + len(_STAFF)))
# A technician every generated dataset has (Carlos Ruiz, the first of the staff): the demo's
# DEFAULT_TECHNICIAN_ID, so a ticket for a record that names no technician can still be filed.
DEMO_TECHNICIAN_ID = STAFF_IDS[0]
# (name, tipo, price, download, upload): speeds deliberately mix "20" and "10M" forms.
_PLANS: list[tuple[str, str, str, str, str]] = [
    ("PLAN 5MB", "PPPOE", "30000.00", "5", "1"),
    ("PLAN 10MB", "PPPOE", "40000.00", "10M", "2M"),
    ("PLAN 20MB", "PPPOE", "55000.00", "20", "5"),
    ("HOGAR 30 MEGAS", "PPPOE", "65000.00", "30M", "10M"),
    ("FIBRA 100MB", "PPPOE", "90000.00", "100", "50"),
    ("Plan Rural 6 Megas", "SIMPLE QUEUE", "35000.00", "6M", "1M"),
    ("QUEUE 15MB", "SIMPLE QUEUE", "48000.00", "15", "3"),
    ("Plan Básico 8M", "SIMPLE QUEUE", "38000.00", "8M", "2M"),
    ("Plan Empresarial 50MB", "SIMPLE QUEUE", "150000.00", "50", "25"),
    ("PCQ 4MB", "PCQ", "25000.00", "4", "1"),
    ("PCQ 10MB", "PCQ", "42000.00", "10", "2"),
    ("PCQ COMUNIDAD 8MB", "PCQ", "20000.00", "8", "2"),
]
_INTERFACES = ["ether1", "ether2", "ether5", "bridge 2", "bridge-lan", "sfp1", "vlan100"]
_ACCENTS = str.maketrans("ÁÉÍÓÚÜÑáéíóúüñ", "AEIOUUNaeiouun")
_PASSWORD_CHARS = string.ascii_letters + string.digits

_HTML_DESCRIPTIONS = [
    "<p>El cliente reporta <b>sin servicio</b> desde ayer en la tarde.</p>",
    "<p>Se solicita visita t&eacute;cnica.<br>Cliente disponible en la ma&ntilde;ana.</p>",
    "<ul><li>Antena sin se&ntilde;al</li><li>Router reiniciado sin &eacute;xito</li></ul>",
]
_TEXT_DESCRIPTIONS = [
    "Cliente reporta lentitud en horas de la noche.",
    "No hay navegación, luces del router en rojo.",
    "Solicita cambio de clave del wifi.",
    "Se cae la conexión varias veces al día.",
    "Cliente pide traslado del servicio a nueva dirección.",
]
_ANSWERS = [
    "Se programa visita técnica.",
    "Técnico asignado, en camino.",
    "Se realinea la antena, cliente confirma servicio.",
    "Se cambia conector RJ45 y se prueba navegación.",
    "Caso cerrado por confirmación del cliente.",
]


@dataclass
class Dataset:
    """Everything the simulator serves. Rows are in the upstream shape except where noted."""

    clients: list[Row]
    # Internal plan records: id, nombre, tipo and (for details) precio, bajada, subida.
    plans: list[Row]
    # Internal ticket records: the upstream row with estado/prioridad as ints 1-4 and
    # respuestas always a list; labels and the answers shape are applied when served.
    tickets: list[Row]
    staff: list[Row]
    zones: list[Row]
    routers: list[Row] = field(default_factory=list)
    # Internal invoice records: the upstream row with estado as an int 1-5.
    invoices: list[Row] = field(default_factory=list)
    payment_methods: list[Row] = field(default_factory=lambda: list(DEFAULT_PAYMENT_METHODS))


def load_subjects() -> dict[int, list[str]]:
    """The upstream's subject catalogue by priority, from the package data file."""
    text = resources.files("isp_gateway").joinpath("data/ticket_subjects.json").read_text("utf-8")
    raw: dict[str, list[str]] = json.loads(text)
    return {int(key): list(values) for key, values in raw.items()}


def _fmt_minute(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M")


def _person_name(rng: random.Random) -> tuple[str, str, str]:
    """(full name as stored, first name, first surname)."""
    first_pool = _FIRST_MALE if rng.random() < 0.5 else _FIRST_FEMALE
    first = rng.choice(first_pool)
    names = [first]
    if rng.random() < 0.45:
        names.append(rng.choice(first_pool))
    surname = rng.choice(_SURNAMES)
    names += [surname, rng.choice(_SURNAMES)]
    full = " ".join(names)
    roll = rng.random()
    # Hand-typed data: mostly upper case, some title case, some without accents.
    if roll < 0.12:
        full = full.title()
    elif roll < 0.22:
        full = full.translate(_ACCENTS)
    elif roll < 0.25:
        full = full.lower()
    return full, first, surname


def _mobile(rng: random.Random) -> str:
    prefix = rng.choice(("300", "301", "304", "310", "311", "313", "315", "317", "320", "350"))
    return f"{prefix}{rng.randrange(10_000_000):07d}"


def _phone_field(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.05:
        return ""
    number = _mobile(rng)
    if roll < 0.10:
        number = rng.choice(("+57", "57")) + number
    if roll < 0.72:
        return number
    extra = [_mobile(rng) for _ in range(rng.choice((1, 1, 2)))]
    if rng.random() < 0.3:
        extra[0] = "57" + extra[0]
    separator = rng.choice((",", ", ", "/", " / ", ";", " "))
    return separator.join([number, *extra])


def two_number_service(dataset: Dataset) -> Row | None:
    """The first service whose phone field holds two numbers joined by a comma (about a
    quarter of the generated fields hold several): an update must keep its second line."""
    for row in dataset.clients:
        parts = str(row.get("telefono") or "").split(",")
        if len(parts) == 2 and all(len(part.strip()) >= 10 for part in parts):
            return row
    return None


def _address(rng: random.Random) -> str:
    if rng.random() < 0.6:
        parts = [rng.choice(_ADDRESS_PREFIXES), rng.choice(_PLACES), rng.choice(_ADDRESS_SUFFIXES)]
        return " ".join(part for part in parts if part)
    return (
        f"{rng.choice(_STREETS)} {rng.randint(1, 150)} # {rng.randint(1, 99)}-{rng.randint(1, 99)}"
    )


def _mac(rng: random.Random) -> str:
    return ":".join(f"{rng.randrange(256):02X}" for _ in range(6))


def _password(rng: random.Random) -> str:
    return "".join(rng.choices(_PASSWORD_CHARS, k=12))


def _slug(text: str) -> str:
    return text.translate(_ACCENTS).lower().replace(" ", "-")


def build_dataset(clients: int = 200, seed: int = 1, *, tickets: int = 300) -> Dataset:
    """Generate a realistic dataset; the same arguments give the same data."""
    rng = random.Random(seed)
    zone_count = rng.randint(5, 15)
    zones: list[Row] = [{"id": i + 1, "nombre": _ZONE_NAMES[i]} for i in range(zone_count)]
    zone_city = {zone["id"]: _CITIES[i % len(_CITIES)] for i, zone in enumerate(zones)}
    routers: list[Row] = [
        {
            "id": zone["id"],
            "nombre": f"MK-{_slug(str(zone['nombre'])).upper()}",
            "ip": f"10.10.{zone['id']}.1",
            "usuario_router": "admin",
            "password_router": _password(rng),
        }
        for zone in zones
    ]
    staff: list[Row] = [
        {"id": i, "nombre": name} for i, name in zip(STAFF_IDS, _STAFF, strict=True)
    ]
    plans: list[Row] = [
        {"id": i + 1, "nombre": n, "tipo": t, "precio": p, "bajada": d, "subida": u}
        for i, (n, t, p, d, u) in enumerate(_PLANS)
    ]
    plan_refs = [({"id": p["id"], "nombre": p["nombre"]}, str(p["precio"])) for p in plans]
    plan_weights = [
        6 if p["tipo"] == "PPPOE" else 4 if p["tipo"] == "SIMPLE QUEUE" else 1 for p in plans
    ]
    staff_refs = [{"id": s["id"], "nombre": s["nombre"]} for s in staff]

    rows: list[Row] = []
    cedulas: set[str] = set()
    usernames: set[str] = set()
    service_id = 100
    states = list(CLIENT_STATES.values())
    for index in range(clients):
        # Ids are sequential with the odd gap, like a database with deleted services.
        service_id += 1 if rng.random() < 0.97 else rng.randint(2, 5)
        full, first, surname = _person_name(rng)
        while True:
            digits = rng.randint(6, 10)
            cedula = str(rng.randrange(10 ** (digits - 1), 10**digits))
            if cedula not in cedulas:
                cedulas.add(cedula)
                break
        username = f"{_slug(first)}-{_slug(surname)}@isp"
        if username in usernames:
            username = f"{_slug(first)}-{_slug(surname)}{service_id}@isp"
        usernames.add(username)
        zone = rng.choice(zones) if rng.random() > 0.02 else None
        city, localities = zone_city[zone["id"]] if zone else rng.choice(_CITIES)
        router = routers[(int(zone["id"]) - 1) if zone else 0]
        estado = rng.choices(states, weights=(80, 10, 6, 4))[0]
        facturas = rng.choices(("Pagadas", "Pendiente de Pago", "Vencidas"), weights=(60, 25, 15))[
            0
        ]
        if facturas == "Pagadas":
            saldo = "0.00" if rng.random() < 0.85 else f"-{rng.randint(1, 30) * 1000}.00"
        else:
            saldo = f"{rng.randint(2, 180) * 500}.00"
        plan_ref, plan_price = rng.choices(plan_refs, weights=plan_weights)[0]
        price_roll = rng.random()
        precio_plan = plan_price if price_roll < 0.85 else "0.00" if price_roll < 0.95 else ""
        cut = date(2026, rng.choice((2, 3, 4)), rng.randint(1, 28))
        fecha_corte = (
            f"{cut.day}/{cut.month:02d}/{cut.year}" if rng.random() < 0.5 else cut.isoformat()
        )
        block = index // 250
        ip = f"172.{16 + (block // 250) % 16}.{block % 250}.{index % 250 + 2}"
        installed = date(2021, 1, 1) + timedelta(days=rng.randrange(1800))
        rows.append(
            {
                "id_servicio": service_id,
                "usuario": username,
                "nombre": full,
                "cedula": cedula,
                "email": f"{_slug(first)}{rng.randint(1, 999)}@gmail.com"
                if rng.random() < 0.6
                else "",
                "telefono": _phone_field(rng),
                "direccion": _address(rng),
                "localidad": rng.choice(localities),
                "ciudad": city,
                "estado": estado,
                "estado_facturas": facturas,
                "zona": dict(zone) if zone else None,
                "ip": ip,
                "mac_cpe": _mac(rng),
                "usuario_cpe": "admin",
                "password_cpe": _password(rng),
                "password_servicio": _password(rng),
                "router": dict(router),
                "interfaz_lan": rng.choice(_INTERFACES),
                "plan_internet": dict(plan_ref),
                "precio_plan": precio_plan,
                "fecha_corte": fecha_corte,
                "saldo": saldo,
                "tecnico": dict(rng.choice(staff_refs)) if rng.random() < 0.85 else None,
                "fecha_instalacion": installed.isoformat(),
                "comentarios": "",
            }
        )
    dataset = Dataset(rows, plans, [], staff, zones, routers)
    dataset.tickets = _build_tickets(rng, dataset, tickets)
    # A stream of their own, so adding these left every earlier field as it was.
    extra = random.Random(seed * 1_000_003 + 17)
    _add_private_fields(extra, rows)
    dataset.invoices = _build_invoices(extra, rows)
    return dataset


def add_answer_cases(dataset: Dataset) -> dict[str, int]:
    """Append the customers a bot must answer carefully (CALLERS.md 2 "Answers a bot can
    say"), after the generated ones, which stay as they are; their ids follow the last one.

    - ``second_service``: a second service of the first client (same cédula, name and
      phone, another address): by-document and by-phone name both services;
    - ``shared_phone``: a relative (own cédula) on the second client's phone number;
    - ``suspended_paid_up``: suspended, owing nothing (one paid invoice, none pending).

    Returns each case's service id. Without clients nothing is added."""
    rows = dataset.clients
    if len(rows) < 2:
        return {}
    first, second = rows[0], rows[1]
    next_id = max(int(r["id_servicio"]) for r in rows) + 1
    cedulas = {str(r.get("cedula")) for r in rows}
    new_cedula = 900_000_001
    while str(new_cedula) in cedulas:
        new_cedula += 1
    # JSON round trip: deep copies of plain rows.
    twin: Row = json.loads(json.dumps(first))
    twin.update(
        id_servicio=next_id,
        usuario=str(first["usuario"]).replace("@", f"{next_id}@", 1),
        direccion="VDA/ LA ESMERALDA FINCA 2",
        ip="172.31.250.2",
    )
    relative: Row = json.loads(json.dumps(second))
    relative.update(
        id_servicio=next_id + 1,
        usuario=f"familiar{next_id + 1}@isp",
        nombre="ROSA ELENA " + str(second["nombre"]).split(" ")[-1],
        cedula=str(new_cedula),
        ip="172.31.250.3",
    )
    paid_up: Row = json.loads(json.dumps(second))
    paid_up.update(
        id_servicio=next_id + 2,
        usuario=f"suspendido{next_id + 2}@isp",
        nombre="CARMEN SUSPENDIDA SIN DEUDA",
        cedula=str(new_cedula + 1 if str(new_cedula + 1) not in cedulas else new_cedula + 2),
        telefono="3219990001",
        estado="Suspendido",
        estado_facturas="Pagadas",
        saldo="0.00",
        ip="172.31.250.4",
    )
    rows += [twin, relative, paid_up]
    issued = date.today().replace(day=1)
    dataset.invoices.append(
        {
            "id_factura": max([int(i["id_factura"]) for i in dataset.invoices] + [5000]) + 1,
            "cliente": {"usuario": paid_up["usuario"], "nombre": paid_up["nombre"]},
            "total": "35000.00",
            "fecha_emision": issued.isoformat(),
            "fecha_vencimiento": (issued + timedelta(days=15)).isoformat(),
            "estado": 2,
        }
    )
    return {
        "second_service": next_id,
        "shared_phone": next_id + 1,
        "suspended_paid_up": next_id + 2,
    }


def suspended_debtors(dataset: Dataset) -> list[tuple[Row, list[int]]]:
    """The suspended clients who owe, each with its pending invoice ids (oldest first): the
    customers a payment promise or a payment report is for."""
    pending: dict[str, list[int]] = {}
    for invoice in dataset.invoices:
        username = (invoice.get("cliente") or {}).get("usuario")
        if invoice.get("estado") == 1 and username:
            pending.setdefault(username, []).append(int(invoice["id_factura"]))
    return [
        (client, pending[client["usuario"]])
        for client in dataset.clients
        if str(client.get("estado", "")).casefold() == "suspendido"
        and client.get("usuario") in pending
    ]


def _add_private_fields(rng: random.Random, rows: list[Row]) -> None:
    for row in rows:
        # Twelve URL-safe characters from 72 random bits (cheaper than choices per row).
        row["password_router_wifi"] = base64.urlsafe_b64encode(rng.randbytes(9)).decode()
        row["password_ssid_router_wifi"] = base64.urlsafe_b64encode(rng.randbytes(9)).decode()
        row["coordenadas"] = f"{rng.uniform(3.5, 7.5):.6f},{rng.uniform(-76.5, -72.5):.6f}"


def _build_invoices(rng: random.Random, rows: list[Row]) -> list[Row]:
    today = date.today()
    first = today.replace(day=1)
    # (issued, due) as served, for monthly bills 1-14 months back and recent ones 1-10 days.
    monthly = {n: _dates(_months_before(first, n)) for n in range(1, 15)}
    recent = {n: _dates(today - timedelta(days=n)) for n in range(1, 11)}
    invoices: list[Row] = []
    many_given = False

    def add(client: Row, total: str, dates: tuple[str, str], estado: int) -> None:
        number = 5001 + len(invoices)
        invoices.append(
            {
                "id_factura": number,
                "cliente": {"usuario": client["usuario"], "nombre": client["nombre"]},
                # About a third of the totals are JSON numbers, the rest decimal strings.
                "total": float(total) if number % 3 == 0 else total,
                "fecha_emision": dates[0],
                "fecha_vencimiento": dates[1],
                "estado": estado,
            }
        )

    for client in rows:
        total = str(client.get("precio_plan") or "")
        if total in ("", "0.00"):
            total = "35000.00"
        facturas = client.get("estado_facturas")
        if facturas == "Vencidas":
            count = rng.randint(2, 3)
            if not many_given and client.get("estado") == "Suspendido":
                count, many_given = 14, True
            # Monthly bills, the newest issued a month ago: all past due.
            for months_back in range(count, 0, -1):
                add(client, total, monthly[months_back], 1)
        elif facturas == "Pendiente de Pago":
            add(client, total, recent[rng.randint(1, 10)], 1)
        else:
            add(client, total, monthly[1], 2)
    return invoices


def _dates(issued: date) -> tuple[str, str]:
    return issued.isoformat(), (issued + timedelta(days=15)).isoformat()


def _months_before(first_of_month: date, months: int) -> date:
    index = first_of_month.year * 12 + first_of_month.month - 1 - months
    return date(index // 12, index % 12 + 1, 1)


def service_ref(client: Row) -> Row:
    """The nested ``servicio`` object of a ticket row."""
    router = client.get("router") or {}
    return {
        "id_servicio": client["id_servicio"],
        "nombre": client.get("nombre"),
        "zona": client.get("zona"),
        "router": {"id": router.get("id"), "nombre": router.get("nombre"), "falla_general": False},
    }


def _build_tickets(rng: random.Random, dataset: Dataset, count: int) -> list[Row]:
    if not dataset.clients or count <= 0:
        return []
    subjects = load_subjects()
    by_zone: dict[int, list[Row]] = {}
    for client in dataset.clients:
        if client["zona"]:
            by_zone.setdefault(client["zona"]["id"], []).append(client)
    plan: list[tuple[int, Row]] = []
    # Active tickets per zone: the first two zones at or over the default cap of 3.
    for position, zone in enumerate(dataset.zones):
        members = by_zone.get(zone["id"])
        if not members:
            continue
        active = 4 if position == 0 else 3 if position == 1 else rng.randint(0, 2)
        plan += [(1, rng.choice(members)) for _ in range(active)]
    while len(plan) < count:
        plan.append((rng.choices((2, 3, 4), weights=(2, 5, 4))[0], rng.choice(dataset.clients)))
    plan = plan[:count]
    base = datetime(2026, 1, 5, 8, 0)
    created = sorted(base + timedelta(minutes=rng.randrange(60 * 24 * 50)) for _ in plan)
    rng.shuffle(plan)
    tickets: list[Row] = []
    for number, ((estado, client), moment) in enumerate(zip(plan, created, strict=True)):
        prioridad = rng.choices((1, 2, 3, 4), weights=(3, 4, 5, 1))[0]
        start = moment.replace(minute=0) + timedelta(hours=1)
        answers = []
        answer_count = rng.randint(1, 3) if estado >= 3 else rng.randint(0, 2)
        for i in range(answer_count):
            answers.append(
                {
                    "respuesta": rng.choice(_ANSWERS),
                    "fecha": _fmt_minute(moment + timedelta(hours=2 + 5 * i)),
                }
            )
        descriptions = _HTML_DESCRIPTIONS if rng.random() < 0.3 else _TEXT_DESCRIPTIONS
        tickets.append(
            {
                "id_ticket": 1001 + number,
                "asunto": rng.choice(subjects[prioridad]),
                "descripcion": rng.choice(descriptions),
                "estado": estado,
                "prioridad": prioridad,
                "fecha_creacion": _fmt_minute(moment),
                "fecha_estimada_inicio": _fmt_minute(start),
                "fecha_estimada_fin": _fmt_minute(start + timedelta(days=3)),
                "tecnico": None if estado == 1 and rng.random() < 0.5 else rng.choice(_STAFF),
                "email_tecnico": "",
                "departamento": rng.choices(DEPARTMENTS, weights=(8, 1, 1, 0))[0],
                "servicio": service_ref(client),
                "origen_reporte": rng.choice(("whatsapp", "llamada", "oficina")),
                "respuestas": answers,
            }
        )
    for number, ticket in enumerate(tickets):
        # The assignee's e-mail; `tecnico` null while it is set is a shape seen in the wild.
        ticket["email_tecnico"] = staff_email(ticket["tecnico"] or _STAFF[number % len(_STAFF)])
    return tickets


def staff_email(name: str) -> str:
    return _slug(name).replace("-", ".") + "@isp.example"


def _state_number(value: Any, labels: dict[int, str]) -> int:
    """A ticket estado/prioridad from a number, digit string or label."""
    if isinstance(value, int) and value in labels:
        return value
    text = str(value).strip()
    if text.isdigit() and int(text) in labels:
        return int(text)
    for number, label in labels.items():
        if label.casefold() == text.casefold():
            return number
    raise ValueError(f"unknown ticket state or priority: {value!r}")


class DataFileError(ValueError):
    """A data file that cannot be read or does not follow the format; the message says where."""


def _rows_with_int_id(raw: dict[str, Any], section: str, id_key: str) -> list[Row]:
    rows = raw.get(section) or []
    if not isinstance(rows, list):
        raise DataFileError(f"'{section}' must be a list")
    for index, row in enumerate(rows):
        ident = row.get(id_key) if isinstance(row, dict) else None
        if not isinstance(ident, int) or isinstance(ident, bool):
            raise DataFileError(f"{section}[{index}]: needs an integer '{id_key}'")
    return rows


def load_dataset(path: Path | str) -> Dataset:
    """Load a dataset from a JSON file in the format of this module's docstring.

    Raises DataFileError (a ValueError) naming the file and the offending entry."""
    try:
        return _load_dataset(path)
    except DataFileError as exc:
        raise DataFileError(f"{path}: {exc}") from None
    except OSError as exc:
        raise DataFileError(f"{path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # JSON syntax, or a value of the wrong kind
        raise DataFileError(f"{path}: {exc}") from None


def _refs(clients: list[Row], name: str) -> list[Row]:
    """The distinct nested ``{"id", "nombre"}`` objects of the clients' ``name`` field."""
    found: dict[int, Row] = {}
    for client in clients:
        ref = client.get(name)
        if isinstance(ref, dict) and isinstance(ref.get("id"), int):
            found.setdefault(ref["id"], ref)
    return list(found.values())


def _load_dataset(path: Path | str) -> Dataset:
    raw = json.loads(Path(path).read_text("utf-8"))
    if not isinstance(raw, dict) or not isinstance(raw.get("clients"), list):
        raise DataFileError("needs a top-level object with a 'clients' list")
    clients = _rows_with_int_id(raw, "clients", "id_servicio")
    for index, plan in enumerate(_rows_with_int_id(raw, "plans", "id")):
        if plan.get("tipo") not in ("PPPOE", "SIMPLE QUEUE", "PCQ"):
            raise DataFileError(f"plans[{index}]: 'tipo' must be PPPOE, SIMPLE QUEUE or PCQ")
    _rows_with_int_id(raw, "tickets", "id_ticket")
    if raw.get("staff") is not None:
        _rows_with_int_id(raw, "staff", "id")
    if raw.get("zones") is not None:
        _rows_with_int_id(raw, "zones", "id")
    plan_details = raw.get("plan_details") or {}
    if not isinstance(plan_details, dict) or not all(
        str(k).isdigit() and isinstance(v, dict) for k, v in plan_details.items()
    ):
        raise DataFileError("'plan_details' must map plan ids to objects")
    details = {int(k): v for k, v in plan_details.items()}
    plans = [{**plan, **details.get(int(plan["id"]), {})} for plan in raw.get("plans") or []]
    zones = raw.get("zones")
    if zones is None:
        zones = _refs(clients, "zona")
    staff = raw.get("staff")
    if staff is None:
        staff = _refs(clients, "tecnico")
    by_id = {c["id_servicio"]: c for c in clients}
    tickets: list[Row] = []
    for row in raw.get("tickets") or []:
        ticket = dict(row)
        ticket["estado"] = _state_number(ticket.get("estado", 1), TICKET_STATES)
        ticket["prioridad"] = _state_number(ticket.get("prioridad", 2), TICKET_PRIORITIES)
        servicio = ticket.get("servicio")
        if isinstance(servicio, int):
            ticket["servicio"] = service_ref(by_id[servicio]) if servicio in by_id else None
        answers = ticket.get("respuestas") or []
        ticket["respuestas"] = [answers] if isinstance(answers, dict) else list(answers)
        tickets.append(ticket)
    invoices: list[Row] = []
    for row in _rows_with_int_id(raw, "invoices", "id_factura"):
        invoices.append({**row, "estado": _state_number(row.get("estado", 1), INVOICE_STATES)})
    dataset = Dataset(clients, plans, tickets, list(staff), list(zones), invoices=invoices)
    if raw.get("payment_methods") is not None:
        dataset.payment_methods = _rows_with_int_id(raw, "payment_methods", "id")
    routers = raw.get("routers")
    if routers is None:
        routers = _refs(clients, "router")
    else:
        _rows_with_int_id(raw, "routers", "id")
    dataset.routers = list(routers)
    return dataset


def dump_dataset(dataset: Dataset, path: Path | str) -> None:
    """Write a dataset in the data file format (tickets with numeric estado/prioridad)."""
    document = {
        "clients": dataset.clients,
        "plans": dataset.plans,
        "tickets": dataset.tickets,
        "staff": dataset.staff,
        "zones": dataset.zones,
        "invoices": dataset.invoices,
        "payment_methods": dataset.payment_methods,
        "routers": dataset.routers,
    }
    Path(path).write_text(json.dumps(document, ensure_ascii=False, indent=1), "utf-8")
