"""One way to show why a room has no answer: a room's coded error (the engine's
:class:`torchatlas.errors.CodedError`, raised here or refused in a sandbox job) or a sandbox
job without a result (:class:`torchatlas.sandboxed.JobFailure`). The text comes from the
translation tables in the reader's language: the cause and the fix in plain words.

>>> error_card(StridesError(ErrorCode.BAD_SHAPE, shape="2,x"))  # doctest: +SKIP
>>> error_card(outcome.failure)  # doctest: +SKIP
"""

from __future__ import annotations

import streamlit as st

from components.contained import failure_card
from components.i18n import language
from torchatlas.errors import CodedError
from torchatlas.sandboxed import JobFailure


def error_text(error: CodedError) -> str:
    """The error's text in the reader's language."""
    return error.text(language())


def error_card(error: CodedError | JobFailure, *, warning: bool = False) -> None:
    """Show ``error`` as one card: an error (or, with ``warning``, a warning: the visitor's
    input is fine but incomplete, e.g. a question still to answer)."""
    if isinstance(error, JobFailure):
        failure_card(error)
        return
    show = st.warning if warning else st.error
    show(error_text(error), icon=":material/error:")
