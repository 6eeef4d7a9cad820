"""One coded error for every room: a stable ``code`` and its parameters, never an English
sentence of its own. A page shows ``<room>.errors.<code>`` from the translation tables in the
reader's language; ``str()`` is the English text, for a notebook or a log.

A room declares its codes as a ``str`` enum and one subclass that names its table::

    class StridesError(CodedError, ValueError):
        room = "strides"
        codes = ErrorCode

    raise StridesError(ErrorCode.BAD_SHAPE, shape="2,x")

>>> from enum import Enum
>>> class Code(str, Enum):
...     NO_SUCH = "no_such"
>>> class DemoError(CodedError):
...     room = "demo"
...     codes = Code
>>> err = DemoError("no_such", name="x")
>>> (err.code, err.params, err.key)
(<Code.NO_SUCH: 'no_such'>, {'name': 'x'}, 'demo.errors.no_such')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields, is_dataclass
from enum import Enum
from typing import Any, ClassVar, Self

from torchatlas.i18n import DEFAULT_LANGUAGE, translate

# How much of torch's own words any refusal keeps: a message may quote a visitor's value (a
# huge shape, a long string), and every refusal crosses the sandbox and reaches a page.
MAX_REFUSAL_WORDS = 2000
MAX_REFUSAL_NAME = 200  # an exception's type name, a call as the room ran it, a condition


@dataclass(frozen=True)
class TorchRefusal:
    """What torch refused, in one shape for every room's results and every sandbox reply:
    its own ``words`` (as the room trimmed them: a first line, a first paragraph), the
    exception it ``raised`` (its type name), the ``call`` it refused as the room ran it, and
    the ``condition`` the room read from the operands that made torch refuse (the room's
    code for it; empty when torch refused for a reason the room does not name). Bounded when
    built, so a reply rebuilt from the sandbox's JSON is bounded too.

    >>> refusal = TorchRefusal.of(RuntimeError("view size is not compatible"), call="x.view(6)")
    >>> (refusal.words, refusal.raised, refusal.call, refusal.condition)
    ('view size is not compatible', 'RuntimeError', 'x.view(6)', '')
    """

    words: str
    raised: str = ""
    call: str = ""
    condition: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "words", str(self.words)[:MAX_REFUSAL_WORDS])
        for name in ("raised", "call", "condition"):
            object.__setattr__(self, name, str(getattr(self, name))[:MAX_REFUSAL_NAME])

    @classmethod
    def of(
        cls,
        exc: BaseException,
        words: str | None = None,
        *,
        call: str = "",
        condition: str = "",
    ) -> TorchRefusal:
        """``exc`` as a refusal: ``words`` as the room trimmed them (default: the message)."""
        said = exception_words(exc) if words is None else words
        return cls(said, type(exc).__name__, call, condition)


class RefusedByTorch:
    """Base of a room's result record that may carry what torch refused (its dataclass field
    ``refusal``): :attr:`torch_message` is the name the pages and tests read its words by."""

    refusal: TorchRefusal | None

    @property
    def torch_message(self) -> str | None:
        """PyTorch's own words, when PyTorch refused."""
        return None if self.refusal is None else self.refusal.words


def exception_words(exc: BaseException) -> str:
    """An exception's message without formatting anything a program built: ``str(exc)``
    formats every argument with ``repr()`` (a KeyError of a huge list would print it), so
    only a message that already is a string is read, and only its first
    :data:`MAX_REFUSAL_WORDS` characters; else the exception's type name."""
    args = getattr(exc, "args", ())
    if len(args) >= 1 and isinstance(args[0], str):
        return args[0][:MAX_REFUSAL_WORDS]
    return type(exc).__name__


class CodedError(Exception):
    """Base of every room's errors. Subclasses set :attr:`room` (the translation table) and
    :attr:`codes` (the room's ``str`` enum of codes, so a code that is not the room's is a
    programming error caught at once)."""

    room: ClassVar[str] = ""
    codes: ClassVar[type[Enum] | None] = None

    def __init__(self, code: Enum | str, **params: Any) -> None:
        self.code = self.codes(code) if self.codes is not None else code
        self.params: dict[str, Any] = params
        super().__init__(str(getattr(self.code, "value", self.code)))

    @property
    def key(self) -> str:
        """The translation key of this error's text."""
        return f"{self.room}.errors.{getattr(self.code, 'value', self.code)}"

    def text(self, lang: str = DEFAULT_LANGUAGE) -> str:
        """The error's text in ``lang``, from the room's translation table."""
        return translate(self.key, lang, **self.shown_params(lang))

    def shown_params(self, lang: str) -> dict[str, Any]:
        """The parameters as the text shows them (a room may translate some, e.g. a kind's
        name); the stored :attr:`params` stay as raised."""
        return dict(self.params)

    @property
    def message(self) -> str:
        return self.text(DEFAULT_LANGUAGE)

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions pickle their message as their only argument; these rebuild from the code.
        return _rebuild, (type(self), self.code, self.params)


def _rebuild(kind: type[CodedError], code: Any, params: dict[str, Any]) -> CodedError:
    error = kind.__new__(kind)
    CodedError.__init__(error, code, **params)
    return error


class SourceError(CodedError, ValueError):
    """A coded error about pasted source code (the rooms that run a visitor's model): where it
    happened (line and column of the source) and the lines the sandbox's allow-list refused.
    It crosses the sandbox as JSON (:meth:`to_dict`) and compares by value. Its texts are
    ``<room>.errors.<kind>.{title,message,hint}``; :meth:`text` without a part is the card.

    A room adds fields of its own by naming them in :attr:`extra` (the shape explorer's layer
    and the shapes it received); they travel, compare and pickle like the others.
    """

    extra: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        kind: Enum | str,
        params: dict[str, Any] | None = None,
        line: int | None = None,
        col: int | None = None,
        refusals: list[Any] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(kind)
        unknown = set(extra) - set(self.extra)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)}")
        self.params = dict(params or {})  # a parameter may be called anything, even "code"
        self.line, self.col = line, col
        self.refusals: list[Any] = list(refusals or [])
        for name in self.extra:
            setattr(self, name, extra.get(name))

    @classmethod
    def of_failure(cls, failure: Any, timeout_s: float, refusal: Callable[[Any], Any]) -> Self:
        """A failed sandbox job that ran pasted source (a
        :class:`~torchatlas.sandboxed.JobFailure`) as this room's error: the one mapping of
        the sandbox's failure kinds (:mod:`torchatlas.sandbox.outcomes`) to a room's codes.
        The kind is the room's code of the same name (its text the room's; one the room does
        not name reads as ``job_error``); the sandbox's English words stay a detail. The texts
        need the time limit and the number of refused lines; ``refusal`` turns each refused
        place into the room's own record."""
        known = {getattr(code, "value", code) for code in cls.codes or ()}
        kind = failure.kind if failure.kind in known else "job_error"
        lines = max(1, len({item.line for item in failure.refusals}))
        return cls(
            kind,
            params={"timeout": f"{timeout_s:g}", "lines": lines, "detail": failure.detail},
            line=failure.line,
            col=failure.col,
            refusals=[refusal(item) for item in failure.refusals],
        )

    @property
    def kind(self) -> Any:
        return self.code

    @property
    def key(self) -> str:
        return f"{self.room}.errors.{getattr(self.kind, 'value', self.kind)}.message"

    def shown_params(self, lang: str) -> dict[str, Any]:
        """A parameter the worker left empty (None) shows as nothing."""
        return {key: "" if value is None else str(value) for key, value in self.params.items()}

    def text(self, lang: str = DEFAULT_LANGUAGE, part: str | None = None) -> str:
        """``part`` ("title", "message" or "hint") in ``lang``; without a part, the card."""
        if part is None:
            return self.card(lang)
        kind = getattr(self.kind, "value", self.kind)
        return translate(f"{self.room}.errors.{kind}.{part}", lang, **self.shown_params(lang))

    def card(self, lang: str) -> str:
        """The whole card: the title, then the message."""
        return f"**{self.text(lang, 'title')}** — {self.text(lang, 'message')}"

    @property
    def message(self) -> str:
        return self.text(DEFAULT_LANGUAGE, "message")

    @property
    def hint(self) -> str:
        return self.text(DEFAULT_LANGUAGE, "hint")

    def __str__(self) -> str:
        return f"{getattr(self.kind, 'value', self.kind)}: {self.message}"

    def _fields(self) -> tuple[Any, ...]:
        extras = tuple(getattr(self, name) for name in self.extra)
        return (self.kind, self.params, self.line, self.col, self.refusals, *extras)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._fields() == other._fields()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.kind, self.line, self.col))

    def __repr__(self) -> str:
        kind = getattr(self.kind, "value", self.kind)
        return f"{type(self).__name__}({kind!r}, params={self.params!r}, line={self.line!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        extras = {name: getattr(self, name) for name in self.extra}
        return _rebuild_source_error, (type(self), self.kind, self.params, self.line, self.col,
                                       self.refusals, extras)  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """JSON for the trip out of the sandbox (the room's schema checks it on the way in)."""
        data = {
            "kind": getattr(self.kind, "value", self.kind),
            "params": {key: _plain(value) for key, value in self.params.items()},
            "line": self.line,
            "col": self.col,
            "refusals": [_plain(refusal) for refusal in self.refusals],
        }
        data.update({name: _plain(getattr(self, name)) for name in self.extra})
        return data


def _plain(value: Any) -> Any:
    """Dataclasses → dicts, enums → values, sequences → lists (JSON-ready)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {item.name: _plain(getattr(value, item.name)) for item in fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _rebuild_source_error(kind: type[SourceError], code: Any, params: dict[str, Any],
                          line: Any, col: Any, refusals: list[Any],
                          extras: dict[str, Any]) -> SourceError:  # fmt: skip
    error = kind.__new__(kind)
    SourceError.__init__(error, code, params, line, col, refusals, **extras)
    return error
