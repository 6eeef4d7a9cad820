"""Which lesson a refusal of PyTorch's is, decided from the condition that caused it: the
operands' flags (``is_inference()``, ``requires_grad``, ``is_leaf``, dtype, shape), the
saved tensors of the graph (freed by a backward, or at another ``_version`` than when they
were saved) and the mode (grad mode, inference mode) — never from words in its message, so a
reworded message cannot change the explanation. A refusal none of these conditions explains
is shown in PyTorch's own words (``torch_error``).

Called at the moment PyTorch raised, with the operands still as they were (a refused op
changes nothing), and with the modes of that moment still in force.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import torch

from torchatlas.autograd.errors import ErrorCode

Lesson = tuple[ErrorCode, dict[str, Any]]
Versions = dict[int, dict[str, int]]
_BROADCASTING = ("add", "sub", "mul", "div", "pow", "add_", "sub_", "mul_", "div_")


_RAW_SAVED: dict[type, tuple[str, ...]] = {}


def raw_saved_names(node: Any) -> tuple[str, ...]:
    """The names a node saved (``_raw_saved_<name>``), read once per node class."""
    kind = type(node)
    if kind not in _RAW_SAVED:
        _RAW_SAVED[kind] = tuple(
            n.removeprefix("_raw_saved_") for n in dir(node) if n.startswith("_raw_saved_")
        )
    return _RAW_SAVED[kind]


def saved_state(node: Any, name: str) -> tuple[bool, torch.Tensor | None]:
    """Whether torch can unpack ``node``'s saved ``name`` now, and the saved data (None
    once a backward freed it). A saved value that is not a tensor always unpacks."""
    data = getattr(getattr(node, f"_raw_saved_{name}"), "data", None)
    try:
        getattr(node, f"_saved_{name}")
    except RuntimeError:
        return False, data
    return True, data


def _tensors(values: Sequence[Any]) -> list[torch.Tensor]:
    return [value for value in values if isinstance(value, torch.Tensor)]


def _broadcasts(shapes: Sequence[tuple[int, ...]]) -> bool:
    try:
        torch.broadcast_shapes(*shapes)
    except RuntimeError:
        return False
    return True


def _matmul_fits(left: tuple[int, ...], right: tuple[int, ...]) -> bool:
    if not left or not right:
        return False
    if len(left) == 1 and len(right) == 1:
        return left == right
    a = (1, *left) if len(left) == 1 else left
    b = (*right, 1) if len(right) == 1 else right
    return a[-1] == b[-2] and _broadcasts([a[:-2], b[:-2]])


def _saves_inference(operands: Sequence[torch.Tensor]) -> bool:
    """An op recorded for backward (grad mode on, outside inference mode, some operand
    requires grad) with an inference tensor among its operands: it would save it."""
    return (
        torch.is_grad_enabled()
        and not torch.is_inference_mode_enabled()
        and any(t.requires_grad for t in operands)
        and any(t.is_inference() for t in operands)
    )


def inplace_lesson(target: torch.Tensor, operands: Sequence[Any]) -> Lesson | None:
    """An in-place write into ``target`` (``target.add_(…)``, ``target += …``)."""
    if target.is_inference() and not torch.is_inference_mode_enabled():
        return ErrorCode.INFERENCE_INPLACE, {}
    if torch.is_grad_enabled() and target.is_leaf and target.requires_grad:
        return ErrorCode.LEAF_INPLACE, {}
    return None


def saved_problem(root: torch.Tensor, versions: Versions) -> Lesson | None:
    """A saved tensor that backward from ``root`` cannot unpack: written in place since it
    was saved (its data is there, at another ``_version`` than the one recorded when its
    node was made: ``versions``, by node id), or freed by an earlier backward (its data is
    gone). Read before the backward runs: a failing backward frees what it already used."""
    stack, seen = [root.grad_fn], set()
    freed = False
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for name in raw_saved_names(node):
            ok, data = saved_state(node, name)
            if ok:
                continue
            if data is None:
                freed = True
                continue
            expected = versions.get(id(node), {}).get(name)
            return ErrorCode.INPLACE_SAVED, {
                # the op that saved it, as torch names the op (SigmoidBackward0: Sigmoid)
                "op": re.sub(r"Backward\d*$", "", type(node).__name__),
                "version": int(data._version),
                "expected": "?" if expected is None else expected,
            }
        stack.extend(nxt for nxt, _ in reversed(node.next_functions))
    return (ErrorCode.BACKWARD_TWICE, {}) if freed else None


def backward_lesson(
    root: torch.Tensor, kwargs: dict[str, Any], versions: Versions
) -> Lesson | None:
    """``root.backward(**kwargs)`` refused."""
    if not root.requires_grad:
        return ErrorCode.NO_GRAD_FN, {}
    if kwargs.get("gradient") is None and root.numel() != 1:
        return ErrorCode.NON_SCALAR_BACKWARD, {}
    return saved_problem(root, versions)


def call_lesson(
    name: str,
    target: torch.Tensor,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    versions: Versions,
) -> Lesson | None:
    """``target.name(*args, **kwargs)`` refused."""
    operands = [target, *_tensors(args), *_tensors(list(kwargs.values()))]
    if name == "backward":
        return backward_lesson(target, kwargs, versions)
    if name == "numpy" and target.requires_grad:
        return ErrorCode.NUMPY_REQUIRES_GRAD, {}
    if name == "requires_grad_":
        if not (target.is_floating_point() or target.is_complex()):
            return ErrorCode.INT_REQUIRES_GRAD, {}
        if target.is_inference() and not torch.is_inference_mode_enabled():
            return ErrorCode.INFERENCE_REQUIRES_GRAD, {}
    if name.endswith("_") and name != "requires_grad_":
        lesson = inplace_lesson(target, operands)
        if lesson is not None:
            return lesson
    if name in _BROADCASTING and not _broadcasts([tuple(t.shape) for t in operands]):
        return ErrorCode.SHAPE_MISMATCH, {}
    if name in ("matmul", "mm") and len(operands) == 2:
        left, right = tuple(operands[0].shape), tuple(operands[1].shape)
        if not _matmul_fits(left, right) or (name == "mm" and (len(left), len(right)) != (2, 2)):
            return ErrorCode.SHAPE_MISMATCH, {}
    if name in ("view", "reshape"):
        return _size_lesson(target, args)
    if _saves_inference(operands):
        return ErrorCode.INFERENCE_TENSOR, {}
    return None


def _size_lesson(target: torch.Tensor, args: Sequence[Any]) -> Lesson | None:
    sizes = list(args[0]) if len(args) == 1 and isinstance(args[0], tuple | list) else list(args)
    if all(isinstance(n, int) for n in sizes):
        known = [n for n in sizes if n != -1]
        product = 1
        for n in known:
            product *= n
        fits = (
            product == target.numel()
            if len(known) == len(sizes)
            else product != 0 and target.numel() % product == 0
        )
        if not fits:
            return ErrorCode.SHAPE_MISMATCH, {}
    return None


def operator_lesson(matmul: bool, left: Any, right: Any) -> Lesson | None:
    """``left <op> right`` refused (an arithmetic operator on at least one tensor)."""
    operands = _tensors([left, right])
    if len(operands) == 2:
        shapes = (tuple(operands[0].shape), tuple(operands[1].shape))
        fits = _matmul_fits(*shapes) if matmul else _broadcasts(shapes)
        if not fits:
            return ErrorCode.SHAPE_MISMATCH, {}
    if _saves_inference(operands):
        return ErrorCode.INFERENCE_TENSOR, {}
    return None


def condition_lesson(outcome: Any) -> Lesson | None:
    """``if <comparison>:`` refused: the comparison gave a tensor of several values."""
    if isinstance(outcome, torch.Tensor) and outcome.numel() > 1:
        return ErrorCode.AMBIGUOUS_CONDITION, {}
    return None


def record_versions(tensor: torch.Tensor, versions: Versions, keep: list[Any]) -> None:
    """Note, for every node new since the last call (reachable from ``tensor``), the
    ``_version`` of each tensor it saved: the version backward will expect. Called right
    after each op, so the versions are those at saving time. ``keep`` holds the nodes, so
    an id in ``versions`` is never reused by another node."""
    stack = [tensor.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or id(node) in versions:
            continue
        saved: dict[str, int] = {}
        for name in raw_saved_names(node):
            data = getattr(getattr(node, f"_raw_saved_{name}"), "data", None)
            if isinstance(data, torch.Tensor) and not data.is_inference():
                saved[name] = int(data._version)
        versions[id(node)] = saved
        keep.append(node)
        stack.extend(nxt for nxt, _ in node.next_functions)
