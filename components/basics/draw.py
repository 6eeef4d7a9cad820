"""Pure builders for the basics room: HTML pictures, tables and text. No ``streamlit``.

Colours come from :class:`components.palette.Palette`, so light and dark both read; every
picture writes its numbers inside its cells (colour alone never carries an answer).
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any

import pandas as pd

from components.format import format_bytes
from components.kit.a11y import scroll_region
from components.palette import Palette
from torchatlas.basics import (
    DTYPES,
    SCALAR_TYPES,
    Broadcast,
    Category,
    Creation,
    Derivation,
    EinsumPlan,
    HdfReport,
    IndexResult,
    OperandKind,
    Promotion,
    PromotionTable,
    SaveReport,
    category,
)
from torchatlas.basics.exact import complex_text
from torchatlas.i18n import translate

# Letter colours for einsum: translucent, so text in the theme's colour reads on both themes.
LETTER_COLOURS = (
    "rgba(238, 76, 44, 0.30)",
    "rgba(47, 127, 216, 0.30)",
    "rgba(46, 160, 67, 0.30)",
    "rgba(217, 164, 0, 0.35)",
    "rgba(150, 80, 200, 0.30)",
    "rgba(0, 160, 170, 0.30)",
    "rgba(200, 60, 120, 0.30)",
    "rgba(120, 120, 120, 0.30)",
)


class ReadyHtml(str):
    """Finished HTML for st.html: a plain string goes through textwrap.dedent (a regex over
    every character on every rerun); st.html takes an object's ``_repr_html_`` as it is."""

    def _repr_html_(self) -> str:
        return str(self)


def _esc(value: object) -> str:
    return html.escape(str(value))


def shape_text(shape: Sequence[int]) -> str:
    return str(tuple(shape))


# --------------------------------------------------------------------------- types


def column_label(kind: OperandKind | str, dtype: str, lang: str) -> str:
    return translate(f"basics.types.column.{OperandKind(kind)}", lang, dtype=dtype)


def _promotion_block(
    found: PromotionTable, kind: OperandKind | str, lang: str, text: Callable[[Any], str]
) -> pd.DataFrame:
    """One block of the table: left tensor dtypes down, the ``kind`` operands across, each
    cell ``text(cell)``."""
    kind = OperandKind(kind)
    names = SCALAR_TYPES if kind is OperandKind.SCALAR else DTYPES
    data = {
        column_label(kind, dtype, lang): [text(found.cell(row, kind, dtype)) for row in found.rows]
        for dtype in names
    }
    return pd.DataFrame(data, index=pd.Index(list(found.rows), name="tensor ⊕"))


def promotion_frame(found: PromotionTable, kind: OperandKind | str, lang: str) -> pd.DataFrame:
    """One block of the table: a cell is the result dtype (marked ``!`` where the real op
    raised)."""
    return _promotion_block(
        found, kind, lang, lambda cell: cell.result_type + ("" if cell.op_dtype else " !")
    )


def promotion_titles(found: PromotionTable, kind: OperandKind | str, lang: str) -> pd.DataFrame:
    """The block of :func:`promotion_frame` with, in each cell, where its dtype comes from
    (:func:`derivation_text` of the cell, as plain text): the cell's hover text."""

    def title(cell: Any) -> str:
        text = derivation_text(cell.derivation, lang, raised=cell.op_dtype is None)
        return text.replace("**", "").replace("`", "")

    return _promotion_block(found, kind, lang, title)


def promotion_html(
    frame: pd.DataFrame,
    palette: Palette,
    titles: pd.DataFrame | None = None,
    *,
    label: str = "tensor ⊕",
) -> str:
    """The table block as HTML (built once per block, language and theme; a styled
    DataFrame would be serialised again on every rerun). Cells that kept the left tensor's
    dtype are tinted in the accent colour, cells that moved to a higher category in blue;
    ``titles`` (same shape) gives each cell its hover text. ``label``: the block's name for
    screen readers (it scrolls sideways on a phone, so it is a keyboard stop). The cells'
    look is one style rule each, not repeated on 144 cells: every phone of a class receives
    this block when its step opens (36 KB before, about half now)."""
    scope = "atlas-promotion"
    style = (
        f"<style>.{scope} table{{border-collapse:collapse}}"
        f".{scope} th,.{scope} td{{padding:0.2em 0.4em;border:1px solid {palette.border};"
        "font-family:monospace}"
        f".{scope} th{{color:{palette.muted};font-weight:500}}"
        f".{scope} td.kept{{background:{_tint(palette.accent)}}}"
        f".{scope} td.up{{background:{_tint(palette.copy)}}}</style>"
    )
    head = "".join(f"<th>{_esc(c)}</th>" for c in [frame.index.name, *frame.columns])
    rows = []
    for number, (row, values) in enumerate(frame.iterrows()):
        tds = [f"<th>{_esc(row)}</th>"]
        hover = [""] * len(values) if titles is None else list(titles.iloc[number])
        for value, title in zip(values, hover, strict=True):
            result = str(value).removesuffix(" !")
            kind = ""
            if result == row:
                kind = " class='kept'"
            elif category(result).rank > category(str(row)).rank:  # torch's own dtype flags
                kind = " class='up'"
            titled = f" title='{html.escape(title, quote=True)}'" if title else ""
            tds.append(f"<td{kind}{titled}>{_esc(value)}</td>")
        rows.append("<tr>" + "".join(tds) + "</tr>")
    table = f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    return ReadyHtml(
        scroll_region(
            style + table,
            label,
            f"overflow-x:auto;color:{palette.text};font-size:0.78rem",
            attributes=f'class="{scope}"',
        )
    )


def _tint(hex_colour: str, alpha: float = 0.22) -> str:
    red, green, blue = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red}, {green}, {blue}, {alpha})"


def derivation_text(found: Derivation, lang: str, *, raised: bool = False) -> str:
    """Where a result dtype comes from, in words: each clause is a comparison of torch's
    result with the operands' own dtypes (:class:`Derivation`), never a rule. ``raised``:
    the dtype is only named by ``torch.result_type`` (the real op raised)."""

    def say(key: str, **params: object) -> str:
        return translate(f"basics.types.why.{key}", lang, **params)

    names = {"left": found.left, "right": found.right_alone, "result": found.result}
    if found.source.value == "neither":
        kind = found.category.value
        clause = say(f"category.{found.category_from}",
                     category=translate(f"basics.types.categories.{kind}", lang))  # fmt: skip
        parts = "part_complex" if found.category is Category.COMPLEX else "part_real"
        part = say(f"{parts}.{found.part_from}", part=found.part, bits=found.part_bits)
        text = say("neither", category=clause, part=part, **names)
    else:
        text = say(found.source.value, **names)
    if found.right_kind.value == "scalar":
        code = repr(SCALAR_TYPES[found.right](1)).strip("()")  # (1+0j) → 1+0j
        text += " " + say("scalar_alone", type=found.right, code=code, alone=found.right_alone)
    return (say("raised") + " " + text) if raised else text


def creation_markdown(made: Creation, lang: str) -> str:
    """Creation, default dtypes, casts and the named-tensor refusal, as one Markdown text."""
    parts = [translate("basics.types.creation_lesson", lang), ""]
    for item in made.made:
        note = "" if item.initialised else " — " + translate("basics.types.uninitialised", lang)
        parts += [f"`{item.code}` → `{item.dtype}`{note}", "", "```text",
                  ", ".join(item.values), "```", ""]  # fmt: skip
    parts += [translate("basics.types.defaults", lang, default=made.default_dtype), ""]
    code = translate("basics.types.col_code", lang)
    values = translate("basics.types.col_values", lang)
    parts += [f"| {code} | dtype | {values} |", "|---|---|---|"]
    parts += [
        f"| `{item.code}` | `{item.dtype}` | {', '.join(item.values)} |" for item in made.defaults
    ]
    parts += ["", translate("basics.types.casts", lang), ""]
    for cast in made.casts:
        same = translate(
            "basics.types.same_object" if cast.same_object else "basics.types.new_tensor", lang
        )
        parts.append(f"- `{cast.code}` → `{cast.dtype}` · {same}")
    parts += ["", translate("basics.types.named", lang), "", "```python"]
    for attempt in made.named:
        parts += [attempt.code, f"# {attempt.raised}: {attempt.message}"]
    parts.append("```")
    return "\n".join(parts)


def exact_short(found: Promotion) -> str:
    """The exact value for a metric: every digit when short, else a shortened form that ends
    in ``…`` (the full digits are in :func:`promotion_notes`)."""
    if found.exact is None:
        return "—"
    return complex_text(found.exact, found.exact_imag, short=True)


def _typed_differs(typed: object, stored: Fraction | None, stored_imag: Fraction | None) -> bool:
    """Whether the decimal Python prints for a float operand (``0.1``) is not the number it
    holds (0.1000000000000000055…): every float is a binary fraction."""
    if isinstance(typed, bool) or not isinstance(typed, float | complex) or stored is None:
        return False
    real, imag = (typed.real, typed.imag) if isinstance(typed, complex) else (typed, None)
    if Fraction(repr(real)) != stored:
        return True
    return imag is not None and stored_imag is not None and Fraction(repr(imag)) != stored_imag


def promotion_notes(found: Promotion, lang: str) -> list[str]:
    """Every digit of torch's value and of the exact one, how far apart they are (exactly),
    and each operand whose stored value is not the decimal the reader sees."""

    def say(key: str, **params: object) -> str:
        return translate(f"basics.types.{key}", lang, **params)

    notes = []
    for operand, stored, imag, changed in (
        (found.a, found.stored_a, found.stored_a_imag, found.a_changed),
        (found.b, found.stored_b, found.stored_b_imag, found.b_changed),
    ):
        if stored is None:
            continue
        shown = complex_text(stored, imag)
        if changed:
            notes.append(say("changed", dtype=operand.dtype, typed=operand.code, stored=shown))
        elif _typed_differs(operand.value, stored, imag):
            notes.append(say("held_as", operand=operand.code, exact=shown, dtype=operand.dtype))
    if found.got is not None and found.exact is not None:
        notes.append(
            say(
                "exact_detail",
                got=complex_text(found.got, found.got_imag),
                exact=complex_text(found.exact, found.exact_imag),
            )
        )
        difference = found.difference
        if difference is not None and (difference[0] != 0 or (difference[1] or 0) != 0):
            imag = difference[1] if difference[1] else None
            notes.append(say("differs", difference=complex_text(difference[0], imag)))
        else:
            notes.append(say("same_value"))
    return notes


# --------------------------------------------------------------------------- broadcasting

_CELL = (
    "display:inline-block;min-width:3.2em;padding:0.35em 0.5em;margin:2px;border-radius:6px;"
    "text-align:center;font-family:monospace;font-size:0.95rem;"
)


def aligned_html(found: Broadcast, palette: Palette, lang: str) -> str:
    """Shapes aligned from the right, one row each, then the result: a stretched dimension
    is tinted and says ``1 → n`` (or ``· → n`` where the shape had no such dimension), the
    failing column is outlined; each operand's expanded strides sit under its sizes."""
    rows = []
    header = "".join(
        f"<span style='{_CELL}color:{palette.muted}'>{dim - found.rank}</span>"
        for dim in range(found.rank)
    )
    label_style = f"display:inline-block;width:6.5em;color:{palette.muted};font-size:0.85rem"
    rows.append(f"<div><span style='{label_style}'>dim</span>{header}</div>")
    names = "abcd"
    for number, operand in enumerate(found.operands):
        cells = []
        for dim, (size, stretched) in enumerate(
            zip(operand.aligned, operand.stretched, strict=True)
        ):
            failing = found.failing_dim is not None and dim - found.rank == found.failing_dim
            border = f"2px solid {palette.accent}" if failing else f"1px solid {palette.border}"
            background = _tint(palette.highlight, 0.45) if stretched else palette.surface
            if size is None:
                text = "·"
                if found.result is not None and stretched:
                    text = f"· → {found.result[dim]}"
                background = _tint(palette.highlight, 0.45) if stretched else "transparent"
            elif stretched and found.result is not None:
                text = f"1 → {found.result[dim]}"
            else:
                text = str(size)
            cells.append(
                f"<span style='{_CELL}background:{background};border:{border};"
                f"color:{palette.text}'>{_esc(text)}</span>"
            )
        rows.append(
            f"<div><span style='{label_style}'><b>{names[number]}</b> "
            f"{_esc(shape_text(operand.shape))}</span>{''.join(cells)}</div>"
        )
        if operand.expanded_strides is not None:
            pad = found.rank - len(operand.expanded_strides)
            strides = "".join(
                f"<span style='{_CELL}padding-top:0;padding-bottom:0;font-size:0.78rem;"
                f"color:{palette.accent_text if stride == 0 else palette.muted}'>{stride}</span>"
                for stride in (*([None] * pad), *operand.expanded_strides)
            )
            caption = translate("basics.broadcast.strides_row", lang)
            rows.append(f"<div><span style='{label_style}'>{_esc(caption)}</span>{strides}</div>")
    if found.result is not None:
        cells = "".join(
            f"<span style='{_CELL}background:{_tint(palette.copy)};border:1px solid "
            f"{palette.border};color:{palette.text};font-weight:600'>{size}</span>"
            for size in found.result
        )
        result_label = translate("basics.broadcast.result_row", lang)
        rows.append(
            f"<div><span style='{label_style}'><b>{_esc(result_label)}</b></span>{cells}</div>"
        )
    return ReadyHtml(
        scroll_region(
            "".join(rows),
            translate("basics.a11y.broadcast", lang),
            f"overflow-x:auto;color:{palette.text};line-height:1.9",
        )
    )


# --------------------------------------------------------------------------- einsum


def letter_colours(plan: EinsumPlan) -> dict[str, str]:
    return {
        label: LETTER_COLOURS[i % len(LETTER_COLOURS)] for i, (label, _) in enumerate(plan.sizes)
    }


def _chip(label: str, size: int, colour: str, palette: Palette, summed: bool = False) -> str:
    shown = "…" + label[1:] if label.startswith("…") else label
    border = f"2px dashed {palette.accent}" if summed else f"1px solid {palette.border}"
    return (
        f"<span style='{_CELL}background:{colour};border:{border};color:{palette.text}'>"
        f"<b>{_esc(shown)}</b>={size}</span>"
    )


def einsum_html(plan: EinsumPlan, palette: Palette, lang: str) -> str:
    """Each operand's dimensions as coloured letter chips with their sizes, then the output's;
    summed letters are dashed and listed under Σ."""
    colours = letter_colours(plan)
    size = plan.size_of
    label_style = f"display:inline-block;width:6em;color:{palette.muted};font-size:0.85rem"
    rows = []
    for operand in plan.operands:
        chips = "".join(
            _chip(label, dim, colours[label], palette, label in plan.summed)
            for label, dim in zip(operand.labels, operand.shape, strict=True)
        )
        rows.append(
            f"<div><span style='{label_style}'><b>{operand.name}</b> "
            f"{_esc(shape_text(operand.shape))}</span>{chips or '()'}</div>"
        )
    if plan.summed:
        chips = "".join(_chip(k, size[k], colours[k], palette, True) for k in plan.summed)
        summed = translate("basics.einsum.summed_row", lang)
        rows.append(f"<div><span style='{label_style}'>Σ {_esc(summed)}</span>{chips}</div>")
    chips = "".join(_chip(k, size[k], colours[k], palette) for k in plan.output)
    out = translate("basics.einsum.output_row", lang)
    rows.append(
        f"<div><span style='{label_style}'><b>{_esc(out)}</b> "
        f"{_esc(shape_text(plan.output_shape))}</span>{chips or '()'}</div>"
    )
    return ReadyHtml(
        scroll_region(
            "".join(rows),
            translate("basics.a11y.einsum", lang),
            f"overflow-x:auto;color:{palette.text};line-height:2",
        )
    )


def einsum_markdown(plan: EinsumPlan, lang: str) -> str:
    """Each letter's size and role as a table, then the FLOPs: the loop nest's count and
    FlopCounterMode's, with what their difference means."""

    def say(key: str, **params: object) -> str:
        return translate(f"basics.einsum.{key}", lang, **params)

    parts = [
        f"| {say('col_letter')} | {say('col_size')} | {say('col_role')} |",
        "|---|--:|---|",
    ]
    for label, size in plan.sizes:
        shown = "…" + label[1:] if label.startswith("…") else label
        role = say("role_summed" if label in plan.summed else "role_kept")
        parts.append(f"| `{shown}` | {size:,} | {role} |")
    parts += ["", *_work_sentences(plan, say)]
    return "\n".join(parts)


def _ops_text(calls: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"`{name}` × {count:,}" for name, count in calls)


def _work_sentences(plan: EinsumPlan, say: Callable[..., str]) -> list[str]:
    """The loop nest's multiplies and adds, what torch ran and what FlopCounterMode counted,
    and how the two totals compare: each sentence a reading of those measured numbers."""
    loops = plan.loop_operations
    lines = [
        say("flops", multiplies=f"{plan.multiplies:,}", additions=f"{plan.additions:,}",
            total=f"{loops:,}"),
        "",
        say("ran", ops=_ops_text(plan.torch_ops)) if plan.torch_ops else say("ran_views"),
        "",
    ]  # fmt: skip
    if plan.counted_flops is None:
        return lines
    counted = plan.counted_flops
    flop_ops = [(name, flops) for name, flops in plan.flop_ops if flops]
    where = say("counted_in", ops=", ".join(f"`{name}`" for name, _ in flop_ops))
    lines.append(say("counted", counted=f"{counted:,}", where=where if flop_ops else ""))
    if counted == loops:
        lines.append(say("compare_equal", total=f"{loops:,}"))
    else:
        key = "compare_fewer" if counted < loops else "compare_more"
        lines.append(say(key, difference=f"{abs(counted - loops):,}", total=f"{loops:,}"))
    if plan.uncounted_ops:
        uncounted = ", ".join(f"`{name}`" for name in plan.uncounted_ops)
        lines += ["", f"*{say('uncounted', ops=uncounted)}*"]
    return lines


# --------------------------------------------------------------------------- indexing


def _grid_blocks(shape: tuple[int, ...]) -> tuple[int, int, int]:
    """(blocks, rows, columns) a tensor is drawn as: its last two dims as a grid, every
    leading index as its own block."""
    if not shape:
        return 1, 1, 1
    if len(shape) == 1:
        return 1, 1, shape[0]
    return math.prod(shape[:-2]), shape[-2], shape[-1]


def _block_label(number: int, shape: tuple[int, ...]) -> str:
    lead = shape[:-2]
    index = []
    for size in reversed(lead):
        index.append(number % size)
        number //= size
    return "x[" + ", ".join(map(str, reversed(index))) + "]" if lead else ""


def cells_html(
    shape: tuple[int, ...],
    values: Sequence[int] | None,
    palette: Palette,
    picked: frozenset[int] | None = None,
    name: str = "x",
    max_cells: int = 512,
) -> str | None:
    """A tensor as grids of cells with its numbers in them. ``picked`` (flat positions) are
    tinted and outlined: the cells an index reads. None when the tensor is too large to
    draw."""
    numel = math.prod(shape)
    if values is None or numel > max_cells:
        return None
    blocks, rows, columns = _grid_blocks(shape)
    if blocks * max(rows, 1) > max_cells or len(values) != numel:
        # a zero-size tensor can still have a million empty blocks or rows to draw
        return None
    cell = (
        "display:inline-block;min-width:2.3em;padding:0.25em 0.3em;margin:1px;border-radius:4px;"
        "text-align:center;font-family:monospace;font-size:0.85rem;"
    )
    parts = []
    position = 0
    for block in range(blocks):
        label = _block_label(block, shape).replace("x[", f"{name}[", 1)
        lines = [
            f"<div style='color:{palette.muted};font-size:0.8rem'>{_esc(label)}</div>"
            if label
            else ""
        ]
        for _ in range(rows):
            line = []
            for _ in range(columns):
                value = values[position]
                lit = picked is not None and value in picked
                background = _tint(palette.highlight, 0.55) if lit else palette.surface
                border = f"2px solid {palette.accent}" if lit else f"1px solid {palette.border}"
                weight = "700" if lit else "400"
                line.append(
                    f"<span style='{cell}background:{background};border:{border};"
                    f"color:{palette.text};font-weight:{weight}'>{value}</span>"
                )
                position += 1
            lines.append("<div style='white-space:nowrap'>" + "".join(line) + "</div>")
        parts.append(
            f"<div style='display:inline-block;margin:0 1em 0.6em 0;"
            f"vertical-align:top'>{''.join(lines)}</div>"
        )
    # Named by the tensor and its shape, words no language changes (this has no ``lang``).
    label = f"{name}: {shape_text(shape)}"
    return ReadyHtml(scroll_region("".join(parts), label, f"overflow-x:auto;color:{palette.text}"))


def side_by_side_html(panels: Sequence[tuple[str, str | None]], missing: str) -> str:
    """Pictures side by side under their bold titles, wrapping to one per row on a phone:
    ``(title, picture HTML or None)``, None shown as the caption ``missing``. One element
    for what would be a row of columns, titles and pictures (each element is server work
    and a message in every run of every phone of a class)."""
    boxes = []
    for title, picture in panels:
        body = picture if picture is not None else f"<p style='{_CAPTION}'>{_esc(missing)}</p>"
        boxes.append(
            "<div style='flex:1 1 16rem;min-width:0'>"
            f"<p style='margin:0 0 0.5rem'><strong>{_esc(title)}</strong></p>{body}</div>"
        )
    return ReadyHtml(
        "<div style='display:flex;flex-wrap:wrap;gap:1rem;align-items:flex-start'>"
        + "".join(boxes)
        + "</div>"
    )


# Streamlit's caption: small, in the text colour at 60 % (the theme's text colour keeps that
# at 4.7:1 or more, .streamlit/config.toml).
_CAPTION = "font-size:0.875rem;opacity:0.6;margin:0"


def index_facts(result: IndexResult, lang: str) -> list[tuple[str, str]]:
    """Label/value rows for the facts beside the picture."""
    view = "view" if result.is_view else "copy"
    return [
        (
            translate("basics.index.fact_kind", lang),
            translate(f"basics.index.kind.{result.kind}", lang),
        ),
        (translate("basics.index.fact_result", lang), translate(f"basics.index.{view}", lang)),
        (translate("basics.index.fact_shape", lang), shape_text(result.result_shape or ())),
        (
            translate("basics.index.fact_strides", lang),
            shape_text(result.result_strides or ()) if result.is_view else "—",
        ),
        (
            translate("basics.index.fact_offset", lang),
            str(result.storage_offset) if result.is_view else "—",
        ),
    ]


# --------------------------------------------------------------------------- saving


def save_markdown(report: SaveReport, lang: str) -> str:
    """The saving report's text: every byte count as a table, what loading gives back, and
    the HDF5 side (partial read, dtype mapping, round trip)."""

    def say(key: str, **params: object) -> str:
        return translate(f"basics.save.{key}", lang, **params)

    rows = (
        ("row_full", report.saved_full),
        ("row_view", report.saved_view),
        ("row_clone", report.saved_clone),
        ("row_together", report.saved_together),
        ("row_storage", report.storage_bytes),
        ("row_view_bytes", report.view_bytes),
    )
    parts = [
        f"| {say('col_what')} | {say('col_bytes')} | {say('col_readable')} |",
        "|---|--:|--:|",
        *(f"| {say(key)} | {size:,} | {format_bytes(size)} |" for key, size in rows),
        "",
        f"*{say('file_name_note')}*",
        "",
        say(
            "loaded",
            storage=format_bytes(report.loaded_view_storage_bytes),
            clone=format_bytes(report.loaded_clone_storage_bytes),
        ),
        "",
        say("together_yes" if report.loaded_shares else "together_no"),
        "",
        f"### {say('hdf5')}",
        "",
    ]
    hdf = report.hdf5
    if hdf.error_code is not None:  # the page shows it as a warning, under this heading
        return "\n".join(parts)
    parts += [
        " ".join(_hdf5_sentences(hdf, say)),
        "",
        say(
            "mapping",
            torch_dtype=report.dtype,
            numpy_dtype=hdf.numpy_dtype or "—",
            hdf5_type=hdf.hdf5_type or "—",
        ),
    ]
    if hdf.round_trip_equal:
        parts += ["", say("round_trip")]
    return "\n".join(parts)


def _hdf5_sentences(hdf: HdfReport, say: Callable[..., str]) -> list[str]:
    """The HDF5 read, in words: each sentence a reading of the measured counts (distinct
    bytes, each byte of the file once) and of the shapes (whether the slice is the whole
    dataset), never a fixed claim."""

    def n(value: int) -> str:
        return f"{value:,}"

    known = hdf.data_offset is not None  # where the data lies: data bytes can be told apart
    lines = [say("file", file=format_bytes(hdf.file_bytes), file_bytes=n(hdf.file_bytes),
                 data=n(hdf.data_bytes))]  # fmt: skip
    detail = ""
    if known:
        detail = (say("of_data", count=n(hdf.open_data_bytes)) if hdf.open_data_bytes
                  else say("of_no_data"))  # fmt: skip
    lines.append(say("opened", opened=n(hdf.open_bytes), detail=detail))
    if hdf.open_requested > hdf.open_bytes:
        lines.append(say("rereads", requested=n(hdf.open_requested), reads=n(hdf.open_reads)))
    slice_key = "slice_whole" if hdf.whole else "slice_part"
    lines.append(say(slice_key, tail=hdf.tail, shape=shape_text(hdf.tail_shape),
                     rows=n(hdf.tail_rows_bytes), data=n(hdf.data_bytes)))  # fmt: skip
    detail = say("of_data", count=n(hdf.tail_data_bytes)) if known else ""
    lines.append(say("slice_read", read=n(hdf.tail_bytes), detail=detail))
    if hdf.tail_requested > hdf.tail_bytes:
        lines.append(say("rereads", requested=n(hdf.tail_requested), reads=n(hdf.tail_reads)))
    if known:
        got, rows = hdf.tail_data_bytes, hdf.tail_rows_bytes
        if got == rows:
            lines.append(say("data_equal", count=n(got), rows=n(rows)))
        else:
            key = "data_more" if got > rows else "data_fewer"
            lines.append(say(key, count=n(got), rows=n(rows), difference=n(abs(got - rows)),
                             opened=n(hdf.open_data_bytes)))  # fmt: skip
        rest = hdf.data_bytes - got
        lines.append(say("rest", rest=n(rest)) if rest else say("rest_none"))
    lines.append(say("counted_how"))
    return lines


def size_bars(items: Mapping[str, int], palette: Palette, highlight: str | None = None) -> str:
    """Horizontal bars, one per labelled size, lengths proportional to the largest, each
    with its byte count written beside it (the picture for "how big is the file")."""
    largest = max(items.values(), default=0) or 1
    rows = []
    for label, size in items.items():
        width = max(80 * size / largest, 0.5)  # room left on the line for the number
        colour = palette.accent if label == highlight else palette.copy
        rows.append(
            "<div style='display:flex;align-items:center;gap:0.6em;margin:3px 0'>"
            f"<span style='flex:0 0 15em;color:{palette.muted};font-size:0.82rem;"
            f"font-family:monospace'>{_esc(label)}</span>"
            "<span style='flex:1 1 auto;white-space:nowrap'>"
            "<span style='display:inline-block;height:1.1em;"
            f"width:{width:.2f}%;background:{_tint(colour, 0.75)};border-radius:3px;"
            f"vertical-align:middle'></span>"
            f"<span style='margin-left:0.5em;color:{palette.text};font-size:0.85rem'>"
            f"{size:,} B</span></span></div>"
        )
    return ReadyHtml(f"<div style='color:{palette.text}'>{''.join(rows)}</div>")
