"""Example chains for the room's menu: each one teaches one idea about storage and strides."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Example:
    shape: tuple[int, ...]
    dtype: str
    ops: tuple[str, ...]


EXAMPLES: dict[str, Example] = {
    "transpose_contiguous": Example((3, 4), "float32", (".t()", ".contiguous()", ".view(2, 6)")),
    "view_fails": Example((3, 4), "float32", (".t()", ".view(-1)")),
    "slicing_steps": Example((4, 6), "float32", ("[1:, ::2]", "[..., 0]", "[None]")),
    "expand_stride_zero": Example((3,), "float32", (".unsqueeze(0)", ".expand(4, 3)")),
    "unfold_window": Example((10,), "float32", (".unfold(0, 4, 2)",)),
    "channels_last": Example(
        (2, 3, 2, 2), "float32", (".to(memory_format=torch.channels_last)", ".permute(0, 2, 3, 1)")
    ),
    "view_dtype": Example((2, 4), "float32", (".view(torch.float16)", ".view(torch.uint8)")),
    "reshape_copies": Example((3, 4), "float32", (".t()", ".reshape(-1)")),
    "diagonal": Example((4, 4), "float32", (".diagonal()",)),
    "as_strided_window": Example((8,), "float32", (".as_strided((3, 4), (2, 1))",)),
    "einsum_view": Example((2, 3), "float32", ("einsum('ij->ji')", ".flip(0)")),
    "chunk_piece": Example((6, 4), "float32", (".chunk(3)[1]", ".T")),
}
