"""The basics room's shared link: the section shown and every section's inputs.

``b_sec`` names the section, then one field per input (``b_l`` the left operand's dtype,
``b_lv`` its value, …: the names the room's links have always used). A dtype, an operand kind,
an op and a saving dtype are closed lists; typed inputs (values, shapes, an equation, an
index) are printable ASCII up to the length their box takes: every number, shape, equation
and index this room writes is ASCII, so a link with ``²`` or ``①`` (digits to
``str.isdigit``, not to ``int``) was not written by it. What a typed input means is checked
by the room's parsers when the section runs, with their own explained refusals.
"""

from __future__ import annotations

from torchatlas.basics.limits import MAX_INDEX_TEXT, MAX_SHAPE_TEXT, MAX_SHAPES_TEXT, MAX_VALUE_TEXT
from torchatlas.basics.promotion import DTYPES, SCALAR_TYPES, Op, OperandKind
from torchatlas.basics.quiz import Section
from torchatlas.basics.saving import SAVE_DTYPES
from torchatlas.links import Choice, LinkSpec, Text

TYPED = r"[ -~]*"  # printable ASCII
MAX_EQUATION_TEXT = 80  # the equation box's length


def _typed(name: str, default: str, key: str, max_len: int) -> Text:
    return Text(name, default, key=key, max_len=max_len, pattern=TYPED)


LINK = LinkSpec(
    "basics",
    "basics_",
    (
        Choice("b_sec", Section.TYPES.value, key="basics_section",
               options=tuple(s.value for s in Section)),
        Choice("b_l", "int8", key="basics_left", options=tuple(DTYPES)),
        _typed("b_lv", "100", "basics_left_value", MAX_VALUE_TEXT),
        Choice("b_op", Op.ADD.value, key="basics_op", options=tuple(o.value for o in Op)),
        Choice("b_rk", OperandKind.SCALAR.value, key="basics_right_kind",
               options=tuple(k.value for k in OperandKind)),
        Choice("b_r", "int", key="basics_right", options=(*DTYPES, *SCALAR_TYPES)),
        _typed("b_rv", "1000", "basics_right_value", MAX_VALUE_TEXT),
        _typed("b_shapes", "(2, 3, 5, 5) (3, 1, 1)", "basics_shapes", MAX_SHAPES_TEXT),
        _typed("b_eq", "...chw,c->...hw", "basics_equation", MAX_EQUATION_TEXT),
        _typed("b_es", "(2, 3, 5, 5) (3,)", "basics_einsum_shapes", MAX_SHAPES_TEXT),
        _typed("b_ishape", "3, 4", "basics_index_shape", MAX_SHAPE_TEXT),
        _typed("b_ix", "x[1:, ::2]", "basics_index", MAX_INDEX_TEXT),
        _typed("b_sshape", "1000, 4", "basics_save_shape", MAX_SHAPE_TEXT),
        _typed("b_sv", "x[:2]", "basics_save_view", MAX_INDEX_TEXT),
        Choice("b_sdt", "float32", key="basics_save_dtype", options=tuple(SAVE_DTYPES)),
    ),
)  # fmt: skip

# Each section's inputs (link field names): a section's run can change only these.
SECTION_FIELDS: dict[Section, tuple[str, ...]] = {
    Section.TYPES: ("b_l", "b_lv", "b_op", "b_rk", "b_r", "b_rv"),
    Section.BROADCASTING: ("b_shapes",),
    Section.EINSUM: ("b_eq", "b_es"),
    Section.INDEXING: ("b_ishape", "b_ix"),
    Section.SAVING: ("b_sshape", "b_sv", "b_sdt"),
}
