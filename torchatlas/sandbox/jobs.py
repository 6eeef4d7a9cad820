"""How a job's function travels to the zygote: as a ``"module:qualname"`` string.

The sandbox names no job of its own. Each caller registers its trusted functions (called as
``fn(namespace, **params)``) with its pool (:meth:`~torchatlas.sandbox.pool.SandboxPool.register`);
the pool sends their names to the zygote, which imports them once, before it forks any child.
A name is accepted only when importing it gives back the very function that was registered,
so what runs in the worker is what the caller handed over.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

Job = Callable[..., dict[str, Any]]


def load_target(target: str) -> Job:
    """The function named ``"module:qualname"`` (imported); raises ImportError,
    AttributeError or ValueError when there is none."""
    module_name, colon, qualname = target.partition(":")
    if not colon or not module_name or not qualname:
        raise ValueError(f"{target!r} is not of the form 'module:qualname'")
    found: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        found = getattr(found, part)
    if not callable(found):
        raise ValueError(f"{target!r} is not callable")
    return found


def target_of(function: Job) -> str:
    """``function``'s ``"module:qualname"``, checked: importing that name must give back this
    very function (not a lambda, a nested function or one defined in ``__main__``)."""
    module_name = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", None)
    target = f"{module_name}:{qualname}"
    if (
        not isinstance(module_name, str)
        or not isinstance(qualname, str)
        or module_name == "__main__"
        or "<" in qualname
    ):
        raise ValueError(
            f"A sandbox job must be a module-level function the worker can import by name; "
            f"{function!r} is not. Define it at the top level of an importable module."
        )
    try:
        found = load_target(target)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(f"The sandbox job {target} cannot be imported by name: {exc}") from exc
    if found is not function:
        raise ValueError(
            f"Importing {target} gives another object than the function registered; register "
            "the function under the name it is defined with."
        )
    return target
