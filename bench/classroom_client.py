"""The browser's side of Streamlit's protocol, for bench/classroom.py: one :class:`Student` is
one tab. ``GET /_stcore/health`` sets the ``_streamlit_xsrf`` cookie; ``/_stcore/stream`` is
opened with the subprotocols ``["streamlit", <token>]``; a ``BackMsg.rerun_script`` names the
page and carries the query string and widget states (each widget's id read from the
``ForwardMsg`` deltas, a keyed widget's key is part of its id); uploads ask for URLs over the
websocket and PUT the file with the XSRF header; ``run_every`` fragments are polled as the
browser polls them. Only 127.0.0.1 is contacted (no proxy).

Each tab connects from a loopback address of its own (:func:`phone_address`: 127.1.x.y), as
each phone in a lecture hall is a machine of its own: the server counts its limits per client
(the peer address), so thirty tabs from 127.0.0.1 would be one laptop, not a class. A tab given
``source=`` shares that address with every other tab given it (one laptop, many sessions)."""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import http.client
import json
import struct
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

# An alert saying one of these, on a page that lacks the action's result, is a refusal.
BUSY_WORDS = ("busy", "another visitor", "try again", "queue is full", "too many")

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy
XSRF_COOKIE = "_streamlit_xsrf"


def phone_address(index: int) -> str:
    """The loopback address tab ``index`` connects from: one machine per student
    (127.1.0.2, 127.1.0.3, …; Linux answers all of 127.0.0.0/8 on the loopback device).
    Negative indices (the tool's own warm-up and first-visit tabs) use 127.0.0.1."""
    if index < 0:
        return "127.0.0.1"
    return f"127.1.{index // 250}.{index % 250 + 2}"


def fetch_xsrf_cookie(base_url: str, source: str | None = None) -> str:
    """GET /_stcore/health from ``source`` (a local address to connect from), as the
    browser's first request does: it sets the XSRF cookie."""
    host, _, port = base_url.removeprefix("http://").partition(":")
    connection = http.client.HTTPConnection(
        host, int(port or 80), timeout=30, source_address=(source, 0) if source else None
    )
    try:
        connection.request("GET", "/_stcore/health")
        response = connection.getresponse()
        cookies = response.headers.get_all("Set-Cookie") or []
        response.read()
    finally:
        connection.close()
    for header in cookies:
        name, _, rest = header.partition("=")
        if name.strip() == XSRF_COOKIE:
            return rest.split(";", 1)[0]
    return ""  # XSRF protection off: the token is simply absent


def put_file(url: str, token: str, name: str, data: bytes, content_type: str) -> int:
    """PUT one file as multipart form data (field "file"), as the browser's uploader does."""
    boundary = f"----classroom{uuid.uuid4().hex}"
    body = b"".join(
        [
            f"--{boundary}\r\n".encode(),
            f'Content-Disposition: form-data; name="file"; filename="{name}"\r\n'.encode(),
            f"Content-Type: {content_type}\r\n\r\n".encode(),
            data,
            f"\r\n--{boundary}--\r\n".encode(),
        ]
    )
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    if token:
        headers["X-Xsrftoken"] = token
        headers["Cookie"] = f"{XSRF_COOKIE}={token}"
    request = urllib.request.Request(url, data=body, method="PUT", headers=headers)
    try:
        with _OPENER.open(request, timeout=120) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


# --------------------------------------------------------------------------- the protocol


def _decode_plotly_array(value: Any) -> list[Any]:
    """A Plotly array: a list, or a typed array (``{"dtype": "u2", "bdata": base64}``)."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict) and "bdata" in value:
        codes = {"i1": "b", "u1": "B", "i2": "h", "u2": "H", "i4": "i", "u4": "I"}
        codes |= {"f4": "f", "f8": "d"}
        code = codes.get(str(value.get("dtype")))
        if code is None:
            return []
        raw = base64.b64decode(value["bdata"])
        count = len(raw) // struct.calcsize(code)
        return list(struct.unpack(f"<{count}{code}", raw[: count * struct.calcsize(code)]))
    return []


def plotly_click(spec_json: str, pick: int) -> str | None:
    """The selection state the browser sends when a point of this figure is clicked: the
    ``pick``-th point (modulo their number) of the first trace that has points."""
    try:
        spec = json.loads(spec_json)
    except ValueError:
        return None
    for curve, trace in enumerate(spec.get("data") or []):
        xs = _decode_plotly_array(trace.get("x"))
        if not xs:
            continue
        ys = _decode_plotly_array(trace.get("y"))
        custom = _decode_plotly_array(trace.get("customdata"))
        index = pick % len(xs)
        point: dict[str, Any] = {
            "curve_number": curve,
            "point_number": index,
            "point_index": index,
            "x": xs[index],
        }
        if index < len(ys):
            point["y"] = ys[index]
        if index < len(custom):
            point["customdata"] = custom[index]
        selection = {"points": [point], "point_indices": [index], "box": [], "lasso": []}
        return json.dumps({"selection": selection})
    return None


@dataclass
class Node:
    """One element or block of the page, as the browser holds it."""

    kind: str  # element type ("markdown", "button", ...) or "block:<type>"
    proto: Any  # the element's own message (Markdown, Button, ...) or the Block
    widget_id: str
    fragment_id: str
    epoch: int  # the number of script runs that had finished when it arrived

    def text(self) -> str:
        for name in ("body", "label", "message"):
            value = getattr(self.proto, name, None)
            if isinstance(value, str) and value:
                return value
        return ""


def _one_line(text: str | None) -> str | None:
    """An error card's Markdown on one line (a report prints one line per action)."""
    return None if text is None else " ".join(text.replace("*", "").split())


def has_key(node: Node, key: str) -> bool:
    """Does the element's id name this user key? (Streamlit ends a keyed element's id with
    ``-<key>``.)"""
    return node.widget_id.endswith(f"-{key}") or f"-{key}-" in node.widget_id


# Widget states the browser sends once (a press), never keeps.
TRANSIENT = frozenset({"trigger_value", "string_trigger_value", "chat_input_value"})


def initial_state(kind: str, proto: Any, widget_id: str) -> Any:
    """The state the browser's widget takes when the element arrives: the value the server
    sets (``set_value``) or else the widget's default; None for a widget that holds no
    value (a button, a select box with nothing chosen)."""
    from streamlit.proto.Common_pb2 import DoubleArray, StringArray
    from streamlit.proto.WidgetStates_pb2 import WidgetState

    setting = bool(getattr(proto, "set_value", False))
    if kind in ("text_input", "text_area"):
        if proto.HasField("value" if setting else "default"):
            return WidgetState(id=widget_id, string_value=proto.value if setting else proto.default)
        return None
    if kind in ("selectbox", "radio"):
        if setting:
            if proto.HasField("raw_value"):
                return WidgetState(id=widget_id, string_value=proto.raw_value)
            return None
        if proto.HasField("default") and 0 <= proto.default < len(proto.options):
            return WidgetState(id=widget_id, string_value=proto.options[proto.default])
        return None
    if kind == "button_group":
        labels = (
            list(proto.raw_values)
            if setting
            else [proto.options[i].content for i in proto.default if i < len(proto.options)]
        )
        return WidgetState(id=widget_id, string_array_value=StringArray(data=labels))
    if kind == "slider":
        if proto.options:  # a select slider: option labels
            labels = (
                list(proto.raw_value)
                if setting
                else [proto.options[int(i)] for i in proto.default if int(i) < len(proto.options)]
            )
            return WidgetState(id=widget_id, string_array_value=StringArray(data=labels))
        numbers = list(proto.value) if setting else list(proto.default)
        return WidgetState(id=widget_id, double_array_value=DoubleArray(data=numbers))
    if kind == "checkbox":
        return WidgetState(id=widget_id, bool_value=proto.value if setting else proto.default)
    if kind == "number_input":
        if proto.HasField("value" if setting else "default"):
            return WidgetState(id=widget_id, double_value=proto.value if setting else proto.default)
        return None
    return None


class ProtocolError(RuntimeError):
    pass


class Student:
    """One browser tab, as Streamlit's frontend talks to the server."""

    def __init__(
        self,
        base_url: str,
        index: int,
        pool: concurrent.futures.Executor,
        *,
        source: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        self.base_url = base_url
        self.index = index
        # The machine this tab is on (its source address), and extra handshake headers (a
        # forged X-Forwarded-For, say).
        self.source = source or phone_address(index)
        self.extra_headers = dict(headers or {})
        self.pool = pool
        self.token = ""
        self.ws: Any = None
        self.nodes: dict[tuple[int, ...], Node] = {}
        self.epoch = 0  # script runs finished so far
        self.last_status: int | None = None
        self.running = False
        self.page_hash = ""
        self.query = ""
        self.session_id = ""
        self.pages: dict[str, str] = {}  # url path → page script hash
        self.page_not_found = ""
        self.closed_reason = ""
        self.last_message_at = time.monotonic()
        self.baseline_counts: dict[str, int] = {}
        # What the browser's widget manager holds: widget id → the WidgetState it sends
        # with every rerun (a widget's default once it is drawn, the value the server set,
        # or the one this tab sent); dropped once its widget leaves the page.
        self.states: dict[str, Any] = {}
        self._fragments_this_run: set[str] = set()
        self._wake = asyncio.Event()
        # Set when a run finishes or the connection ends: what a waiter for a page state
        # waits on (checking the page at every message, or every few milliseconds, cost this
        # tool as much CPU as the server spent, on the server's own machine).
        self.settled = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self._auto: dict[str, asyncio.Task[None]] = {}
        self._url_requests: dict[str, asyncio.Future[Any]] = {}
        self._status = ForwardMsg.ScriptFinishedStatus
        self._pending: tuple[int, Callable[[int], bool], float] | None = None
        self._verdict: tuple[float, str | None] | None = None

    # ------------------------------------------------------------------ connection
    async def connect(self) -> None:
        from websockets.asyncio.client import connect

        loop = asyncio.get_running_loop()
        self.token = await loop.run_in_executor(
            self.pool, fetch_xsrf_cookie, self.base_url, self.source
        )
        headers = {"Cookie": f"{XSRF_COOKIE}={self.token}"} if self.token else {}
        headers.update(self.extra_headers)
        self.ws = await connect(
            self.base_url.replace("http://", "ws://", 1) + "/_stcore/stream",
            subprotocols=["streamlit", self.token] if self.token else ["streamlit"],
            additional_headers=headers,
            origin=self.base_url,
            proxy=None,
            max_size=None,
            open_timeout=60,
            ping_interval=None,  # the browser sends no pings; a busy server must not drop us
            close_timeout=5,
            local_addr=(self.source, 0),
        )
        self._reader = asyncio.create_task(self._read(), name=f"student-{self.index}-reader")

    async def close(self) -> None:
        for task in self._auto.values():
            task.cancel()
        self._auto.clear()
        if self.ws is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.ws.close(), 10)
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(BaseException):
                await self._reader

    async def _send(self, back_msg: Any) -> None:
        if self.ws is None:
            raise ProtocolError("not connected")
        await self.ws.send(back_msg.SerializeToString())

    async def send_rerun(
        self,
        widgets: Sequence[Any] = (),
        *,
        fragment_id: str = "",
        page_name: str = "",
        page_hash: str | None = None,
        query: str | None = None,
        auto: bool = False,
        keep_page: bool = True,
    ) -> None:
        """A rerun, carrying what the browser carries: the state of every widget on the page
        (``keep_page``; a page change carries none) with ``widgets`` (the changes) instead
        of theirs. Streamlit reads a widget missing from the message as unchanged only while
        it stays drawn: a widget drawn again after a while (another section shown between)
        gets the browser's value from this message, or none."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ClientState_pb2 import ClientState, ContextInfo

        state = ClientState(
            query_string=self.query if query is None else query,
            page_script_hash=self.page_hash if page_hash is None else page_hash,
            page_name=page_name,
            fragment_id=fragment_id,
            is_auto_rerun=auto,
            context_info=ContextInfo(
                timezone="UTC",
                timezone_offset=0,
                locale="en-US",
                url=f"{self.base_url}/{page_name}",
                is_embedded=False,
                color_scheme="light",
            ),
        )
        changed = {widget.id for widget in widgets}
        if keep_page:
            on_page = self._widget_ids()
            state.widget_states.widgets.extend(
                kept for wid, kept in self.states.items() if wid in on_page and wid not in changed
            )
        state.widget_states.widgets.extend(widgets)
        for widget in widgets:
            if widget.WhichOneof("value") not in TRANSIENT:
                self.states[widget.id] = widget
        await self._send(BackMsg(rerun_script=state))

    def _widget_ids(self) -> set[str]:
        return {node.widget_id for node in self.nodes.values() if node.widget_id}

    # ------------------------------------------------------------------ reading
    async def _read(self) -> None:
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        try:
            async for data in self.ws:
                message = ForwardMsg()
                message.ParseFromString(data)
                self.handle(message)
                self.last_message_at = time.monotonic()
                self._wake.set()
        except Exception as error:  # the connection ended: every waiter must hear of it
            self.closed_reason = f"connection lost: {type(error).__name__}"
        else:
            self.closed_reason = "connection closed by the server"
        finally:
            for future in self._url_requests.values():
                if not future.done():
                    future.set_exception(ProtocolError(self.closed_reason))
            self._wake.set()
            self.settled.set()

    @property
    def polling(self) -> frozenset[str]:
        """The fragments whose ``run_every`` timer this student is polling now."""
        return frozenset(self._auto)

    def handle(self, message: Any) -> None:
        """Take in one ForwardMsg as the websocket delivers it (a test may feed them)."""
        kind = message.WhichOneof("type")
        if kind == "delta":
            self._delta(message)
        elif kind == "new_session":
            session = message.new_session
            if session.initialize.session_id:
                self.session_id = session.initialize.session_id
            for page in session.app_pages:
                self.pages[page.url_pathname] = page.page_script_hash
            if not message.metadata.run.fragment_ids:  # a full run: the browser clears
                for task in self._auto.values():  # its polling timers
                    task.cancel()
                self._auto.clear()
            self.running = True
        elif kind == "navigation":
            nav = message.navigation
            for page in nav.app_pages:
                self.pages[page.url_pathname] = page.page_script_hash
            if nav.page_script_hash:
                self.page_hash = nav.page_script_hash
        elif kind == "page_info_changed":
            self.query = message.page_info_changed.query_string
        elif kind == "session_status_changed":
            self.running = message.session_status_changed.script_is_running
        elif kind == "script_finished":
            self._finished(message)
        elif kind == "auto_rerun":
            self._start_auto(message.auto_rerun.fragment_id, message.auto_rerun.interval)
        elif kind == "stop_auto_rerun":
            for fragment_id in message.stop_auto_rerun.fragment_ids:
                task = self._auto.pop(fragment_id, None)
                if task is not None:
                    task.cancel()
        elif kind == "file_urls_response":
            response = message.file_urls_response
            future = self._url_requests.pop(response.response_id, None)
            if future is not None and not future.done():
                future.set_result(response)
        elif kind == "page_not_found":
            self.page_not_found = message.page_not_found.page_name or "?"

    def _delta(self, message: Any) -> None:
        delta = message.delta
        path = tuple(message.metadata.delta_path)
        which = delta.WhichOneof("type")
        if delta.fragment_id:
            self._fragments_this_run.add(delta.fragment_id)
        if which == "new_element":
            element = delta.new_element
            element_type = element.WhichOneof("type") or "?"
            inner = getattr(element, element_type, None)
            widget_id = getattr(inner, "id", "") if inner is not None else ""
            self._drop_below(path)
            self.nodes[path] = Node(
                element_type, inner, widget_id or "", delta.fragment_id, self.epoch
            )
            if widget_id:
                shown = initial_state(element_type, inner, widget_id)
                if getattr(inner, "set_value", False) or widget_id not in self.states:
                    if shown is None:  # set to nothing (a cleared box), or no value at all
                        self.states.pop(widget_id, None)
                    else:
                        self.states[widget_id] = shown
        elif which == "add_block":
            block = delta.add_block
            block_type = block.WhichOneof("type") or "?"
            old = self.nodes.get(path)
            if old is None or old.kind != f"block:{block_type}":
                self._drop_below(path)
            self.nodes[path] = Node(
                f"block:{block_type}", block, getattr(block, "id", "") or "", delta.fragment_id,
                self.epoch,
            )  # fmt: skip

    def _drop_below(self, path: tuple[int, ...]) -> None:
        depth = len(path)
        for other in [p for p in self.nodes if len(p) > depth and p[:depth] == path]:
            del self.nodes[other]

    def _finished(self, message: Any) -> None:
        status = message.script_finished
        current = self.epoch
        if status == self._status.FINISHED_SUCCESSFULLY:
            # The browser drops what the finished run did not send again.
            self.nodes = {p: n for p, n in self.nodes.items() if n.epoch >= current}
        elif status == self._status.FINISHED_FRAGMENT_RUN_SUCCESSFULLY:
            fragments = set(message.metadata.run.fragment_ids) | self._fragments_this_run
            self.nodes = {
                p: n
                for p, n in self.nodes.items()
                if n.epoch >= current or n.fragment_id not in fragments
            }
        if status in (
            self._status.FINISHED_SUCCESSFULLY,
            self._status.FINISHED_FRAGMENT_RUN_SUCCESSFULLY,
        ):  # the browser forgets the state of widgets no longer drawn
            on_page = self._widget_ids()
            self.states = {wid: kept for wid, kept in self.states.items() if wid in on_page}
        self._fragments_this_run = set()
        self.last_status = status
        self.epoch += 1
        self.running = False
        self._judge()
        self.settled.set()

    def _start_auto(self, fragment_id: str, interval_s: float) -> None:
        if not fragment_id:
            return  # the browser ignores an auto-rerun without a fragment
        old = self._auto.pop(fragment_id, None)
        if old is not None:
            old.cancel()

        async def poll() -> None:
            while True:
                await asyncio.sleep(max(0.05, interval_s))
                with contextlib.suppress(Exception):
                    await self.send_rerun(fragment_id=fragment_id, auto=True)

        self._auto[fragment_id] = asyncio.create_task(poll(), name=f"auto-{fragment_id}")

    # ------------------------------------------------------------------ the page
    def find(
        self,
        kind: str | None = None,
        key: str | None = None,
        where: Callable[[Node], bool] | None = None,
    ) -> list[Node]:
        """Nodes in page order, of an element type, whose widget id names ``key``."""
        found = []
        for path in sorted(self.nodes):
            node = self.nodes[path]
            if kind is not None and node.kind != kind:
                continue
            if key is not None and not has_key(node, key):
                continue
            if where is not None and not where(node):
                continue
            found.append(node)
        return found

    def current_value(self, node: Node) -> Any:
        """What the widget shows now, as the browser sends it: a string (select box, text
        box, radio), a list of option labels (pills, segmented control, select slider), a
        number or a flag; None when it holds nothing."""
        state = self.states.get(node.widget_id) or initial_state(
            node.kind, node.proto, node.widget_id
        )
        if state is None:
            return None
        value = getattr(state, state.WhichOneof("value") or "", None)
        return list(value.data) if hasattr(value, "data") else value

    def problems(self) -> tuple[str | None, str | None]:
        """(a hard error: an exception or error element; a warning or a "busy" note) on the
        page now. A warning counts only when the action's result is missing."""
        from streamlit.proto.Alert_pb2 import Alert

        hard = warning = None
        for node in self.find():
            if node.kind == "exception":
                hard = hard or f"exception: {node.proto.type} {node.proto.message}".strip()
            elif node.kind == "alert" and node.proto.format == Alert.ERROR:
                hard = hard or f"error: {node.text()}"
            elif node.kind == "alert" and node.proto.format == Alert.WARNING:
                warning = warning or f"warning: {node.text()}"
            elif node.kind == "alert" and any(w in node.text().lower() for w in BUSY_WORDS):
                warning = warning or f"note: {node.text()}"  # "busy" said in another colour
        if self.page_not_found:
            hard = hard or f"page not found: {self.page_not_found}"
        return _one_line(hard), _one_line(warning)

    def fresh(self, since_epoch: int) -> list[Node]:
        """Nodes that arrived after the first ``since_epoch`` runs had finished."""
        return [n for n in self.find() if n.epoch >= since_epoch]

    # ------------------------------------------------------------------ one action
    def _judge(self) -> None:
        """At each finished run: has the pending action got its result, or an error?

        Judged as the finish arrives (not when the waiting task next wakes), so a poll that
        starts right after the deciding run cannot delay the verdict."""
        if self._pending is None or self._verdict is not None:
            return
        since, done, started = self._pending
        if self.epoch <= since or self.last_status == self._status.FINISHED_EARLY_FOR_RERUN:
            return  # nothing finished since the send, or the script asked for another run
        elapsed = time.perf_counter() - started
        hard, warning = self.problems()
        if self.last_status == self._status.FINISHED_WITH_COMPILE_ERROR:
            self._verdict = (elapsed, "the page script failed to compile")
        elif hard:
            self._verdict = (elapsed, hard)
        elif done(since) and not self._auto:  # a page still polling a job is not done
            self._verdict = (elapsed, None)
        elif warning and not self._auto:
            self._verdict = (elapsed, warning)

    async def act(
        self,
        send: Callable[[], Awaitable[None]],
        done: Callable[[int], bool],
        timeout_s: float,
        deadline: float,
        quiet_s: float = 1.5,
    ) -> tuple[float, str | None]:
        """Send, then wait for a finished run that shows the result; (seconds, error).

        ``done(since)`` looks at the page after each finished run. A run that ends without
        the result, while the page polls no job and the server says nothing more for
        ``quiet_s``, is an error, as is a timeout."""
        since = self.epoch
        started = time.perf_counter()
        limit = min(time.monotonic() + timeout_s, deadline)
        self._pending, self._verdict = (since, done, started), None
        self._wake.clear()
        try:
            try:
                await send()
            except Exception as error:
                elapsed = time.perf_counter() - started
                return elapsed, f"send failed: {type(error).__name__}: {error}"
            while self._verdict is None:
                remaining = limit - time.monotonic()
                if remaining <= 0:
                    return time.perf_counter() - started, f"timeout after {timeout_s:g} s"
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), min(remaining, quiet_s))
                self._wake.clear()
                if self._verdict is not None:
                    break
                if self.closed_reason:
                    return time.perf_counter() - started, self.closed_reason
                settled = (
                    self.epoch > since
                    and not self.running
                    and not self._auto
                    and self.last_status != self._status.FINISHED_EARLY_FOR_RERUN
                    and time.monotonic() - self.last_message_at >= quiet_s
                )
                if settled:
                    hard, warning = self.problems()
                    elapsed = time.perf_counter() - started
                    return elapsed, hard or warning or "the run finished without the result"
            return self._verdict
        finally:
            self._pending = None

    # ------------------------------------------------------------------ uploads
    async def upload(self, uploader: Node, name: str, data: bytes) -> None:
        """Ask for an upload URL, PUT the file, and tell the widget (one rerun)."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.Common_pb2 import (
            FileUploaderState,
            FileURLs,
            FileURLsRequest,
            UploadedFileInfo,
        )
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        request_id = uuid.uuid4().hex
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._url_requests[request_id] = future
        await self._send(
            BackMsg(
                file_urls_request=FileURLsRequest(
                    request_id=request_id, file_names=[name], session_id=self.session_id
                )
            )
        )
        response = await asyncio.wait_for(future, 60)
        if response.error_msg or not response.file_urls:
            raise ProtocolError(f"no upload URL: {response.error_msg or 'empty answer'}")
        urls = response.file_urls[0]
        target = urls.upload_url
        if target.startswith("/"):
            target = self.base_url + target
        elif not target.startswith("http"):
            target = f"{self.base_url}/{target}"
        status = await asyncio.get_running_loop().run_in_executor(
            self.pool, put_file, target, self.token, name, data, "image/jpeg"
        )
        if status not in (200, 204):
            raise ProtocolError(f"upload answered HTTP {status}")
        info = UploadedFileInfo(
            name=name,
            size=len(data),
            file_id=urls.file_id,
            file_urls=FileURLs(
                file_id=urls.file_id, upload_url=urls.upload_url, delete_url=urls.delete_url
            ),
        )
        state = WidgetState(
            id=uploader.widget_id,
            file_uploader_state_value=FileUploaderState(uploaded_file_info=[info]),
        )
        await self.send_rerun([state], fragment_id=uploader.fragment_id)
