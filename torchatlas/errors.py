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

from enum import Enum
from typing import Any, ClassVar

from torchatlas.i18n import DEFAULT_LANGUAGE, translate


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
