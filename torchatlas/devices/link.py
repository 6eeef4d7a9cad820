"""The devices room's shared link: what a teacher shares to point a class at one thing.

The room measures this server live, so a link cannot carry results; it carries what the
visitor chose: the demonstration the link opens (run once on opening, its result shown), each
demonstration's variant, and the transfer benchmark's settings (largest copy, time budget).
A link never starts a benchmark: the board measures only when a visitor presses "run".

The largest copy is one of the benchmark's sizes (:data:`~torchatlas.devices.transfer.SIZES`,
up to the largest the memory budget allows), written in bytes. A link naming a larger size (one
written before the budget, or by hand) is a part the room cannot use: the notice says so, and the
default, the largest size, stands. A machine with less free memory offers fewer sizes, and the
room then keeps the largest it offers (the link's value is still the one shared).
"""

from __future__ import annotations

from torchatlas.devices.demos import DEMONSTRATIONS
from torchatlas.devices.transfer import (
    DEFAULT_MAX_BYTES,
    DEFAULT_TIME_BUDGET_S,
    MAX_TIME_BUDGET_S,
    SIZES,
)
from torchatlas.links import Choice, Field, Int, LinkSpec

NO_DEMO = ""  # the link opens no demonstration (each waits for its "run" button)
VARIANT_PREFIX = "d_"


def variant_field(key: str) -> str:
    """The link field that carries demonstration ``key``'s variant."""
    return f"{VARIANT_PREFIX}{key}"


def _variant_fields() -> tuple[Field, ...]:
    return tuple(
        Choice(variant_field(key), variants[0], key=f"devices_variant_{key}", options=variants)
        for key, (_, variants) in DEMONSTRATIONS.items()
        if len(variants) > 1  # a demonstration with one variant has nothing to choose
    )


LINK = LinkSpec(
    "devices",
    "devices_",
    (
        Choice("d_demo", NO_DEMO, key="devices_open_demo", options=(NO_DEMO, *DEMONSTRATIONS)),
        *_variant_fields(),
        # Sizes as their byte counts: a closed list, so a link names a size the benchmark has
        # (never one above the memory budget).
        Choice(
            "d_max",
            str(DEFAULT_MAX_BYTES),
            key="devices_bench_max",
            options=tuple(str(size) for size in SIZES),
        ),
        Int(
            "d_budget",
            int(DEFAULT_TIME_BUDGET_S),
            key="devices_bench_budget",
            low=1,
            high=int(MAX_TIME_BUDGET_S),
        ),
    ),
)
