"""What a lesson may ask of each room: the fields of its shared link, and the probes a test
may use to check that the room shows a step's expected value.

A step can only name a room state that the room's own shared link can carry, so a lesson
never reaches a state a visitor could not reach by link. The lesson tests check these
tables against each room's code (every field is one its ``components/<room>/`` reads).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RoomLink:
    key: str  # the room's URL path and views/<key>.py
    fields: tuple[str, ...]  # query-parameter names its link carries
    multi: tuple[str, ...] = ()  # fields a link repeats (one value per item)
    source_field: str | None = None  # where pasted source travels (encoded by the room)
    session_prefixes: tuple[str, ...] = ()  # the room's session keys start with one of these

    @property
    def script(self) -> str:
        return f"views/{self.key}.py"


ROOMS: dict[str, RoomLink] = {
    room.key: room
    for room in (
        RoomLink("basics", ("b_sec", "b_l", "b_lv", "b_op", "b_r", "b_rk", "b_rv", "b_shapes",
                            "b_eq", "b_es", "b_ishape", "b_ix", "b_sshape", "b_sv", "b_sdt"),
                 session_prefixes=("basics_",)),
        RoomLink("strides", ("s_shape", "s_dtype", "s_ops", "s_seed", "s_step"), multi=("s_ops",),
                 session_prefixes=("strides_",)),
        RoomLink("autograd", ("a_ex", "a_prog", "a_seed", "a_root", "a_step"),
                 session_prefixes=("autograd_",)),
        RoomLink("modules", ("nn_section", "nn_preset", "nn_model", "nn_lr", "nn_steps",
                             "nn_mode", "nn_train", "nn_save", "nn_forget"),
                 source_field="nn_src", session_prefixes=("modules_",)),
        RoomLink("shapes", ("m_model", "m_preset", "m_shapes", "m_dtypes", "m_sym"),
                 source_field="m_src", session_prefixes=("shapes_",)),
        # the classification room's keys are c_* (its model key doubles as the URL field)
        RoomLink("classify", ("c_model",), session_prefixes=("classify_", "c_")),
        RoomLink("devices", (), session_prefixes=("devices_",)),
    )
}  # fmt: skip

# Probes: how a test reads a value off a rendered room (tests/app/test_lessons.py implements
# each). name → (the room it reads, whether it needs ``at``).
PROBES: dict[str, tuple[str | None, bool]] = {
    "text": (None, False),  # the value appears on the page (as a tuple, 2×3 or 2 × 3)
    "strides.numbers": ("strides", False),  # a cell of "this step in numbers"
    "autograd.variable": ("autograd", True),  # the variables table, row ``at``
    "autograd.freeze": ("autograd", False),  # the Freezing tab's trainable count (its engine)
    "basics.result_dtype": ("basics", False),  # the promotion explorer's result dtype
    "shapes.layer": ("shapes", True),  # the output shape of layer ``at``
    "shapes.error": ("shapes", False),  # the analysis fails, explained (value "error")
    "modules.metric": ("modules", True),  # the inspector's metric labelled by key ``at``
    "classify.tensor_shape": ("classify", False),  # the tensor the network receives
    "devices.accelerator": ("devices", False),  # the inventory's accelerator verdict
}
