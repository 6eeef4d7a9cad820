"""Once per server process: load the engine in one order, then warm the slow parts.

Streamlit runs nothing of ours until a visitor arrives, and in a classroom the first visitors
arrive together. Two script threads importing torch, torchvision and the rooms at the same
moment, each in its own order, can deadlock Python's per-module import locks (a
``_DeadlockError`` on a page). So the first run imports every room under one lock, in a fixed
order; later runs find the modules loaded and pass straight through.

Then the slow parts: the sandbox's zygote (it imports torch in its own process), and every
warm-up the rooms registered (components/upkeep.py: the default classifier, the shape
explorer's default analysis). Under ``streamlit run app.py`` all of
this runs before the server takes its first request (app.py's ``st.App`` lifespan,
:func:`server_lifespan`); under a server started another way (AppTest) the first visitor's
run imports the rooms and a background thread warms the rest.

Garbage collection. Python's cycle collector walks every tracked object on a full collection,
with the GIL held: after torch, torchvision, pandas, Plotly and a model are loaded that is
several hundred thousand objects, and every visitor waits while it runs. Streamlit runs such a
collection after every script run by default (``runner.postScriptGC``), so in a busy classroom
those collections alone serialise everyone. So the app switches that off (.streamlit/config.toml)
and instead (1) moves everything loaded at start-up, which lives as long as the process, into
the collector's permanent generation (``gc.freeze``), and (2) collects on a timer from one
background thread, so cyclic garbage from visitors' runs is still returned within a minute,
and asks the C allocator to hand freed memory back to the system. The same thread ends the
sessions whose reconnect window has passed (components/upkeep.py). (3) On a server, full
collections are left to that thread. Python starts one itself once the objects that reached
its oldest generation since the last full collection are more than a quarter of that
generation; after the freeze that generation is small, so under a class of a hundred phones it
happened every 3-5 s, 10-106 ms each with the GIL held, often in the middle of a move (24 in
an 80-s lesson, timed with ``gc.callbacks`` under bench/classmode_load.py).
Reference counting, which frees almost everything, is unaffected by any of this.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import importlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable

from components import upkeep, uploads
from components.rooms import built_rooms

_LOG = logging.getLogger(__name__)
_IMPORT_LOCK = threading.Lock()
_started = threading.Event()
_warmed = threading.Event()
# How often the background collector runs a full collection (see the module's docstring).
COLLECT_EVERY_S = 15.0
QUIET_WAIT_S = 5.0  # a full collection waits this long at most for a quiet moment
QUIET_CHECK_S = 0.05
_done = threading.Event()

# torch first: everything below imports it, and its own import is the long one.
ENGINE_MODULES = ("torch", "torchvision.models", "torchatlas.i18n")
# Not rooms, but warmed with them: class mode registers its warm-up (lessons, database).
CLASS_MODULES = ("components.classmode.warm",)


def _room_modules() -> list[str]:
    modules = []
    for room in built_rooms():
        modules += [room.engine, f"{room.pages}.state"]
        modules += [f"{room.pages}.draw", f"{room.pages}.panels"]
    return modules


def import_rooms() -> None:
    """Import the engine and every built room once, serialised across script threads."""
    if _done.is_set():
        return
    with _IMPORT_LOCK:
        if _done.is_set():
            return
        for name in (*ENGINE_MODULES, *_room_modules(), *CLASS_MODULES):
            try:
                importlib.import_module(name)
            except ImportError:  # a room without that module: the page reports its own errors
                _LOG.debug("warm: %s not importable", name, exc_info=True)
        freeze_long_lived()
        _done.set()


def freeze_long_lived() -> None:
    """Collect once, then exempt every object alive now from later full collections."""
    gc.collect()
    gc.freeze()


# The oldest generation's threshold that no count reaches: Python never starts a full
# collection itself (the timer's :func:`collect_periodically` does, every COLLECT_EVERY_S).
NO_AUTOMATIC_FULL_COLLECTION = 1 << 30


def leave_full_collections_to_the_timer() -> None:
    """Only :func:`collect_periodically` runs full collections from now on (young ones are
    Python's as before). For a server, whose collector thread is running."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, NO_AUTOMATIC_FULL_COLLECTION)


# glibc's mallopt parameter for the number of malloc arenas (malloc.h).
_M_ARENA_MAX = -8
MALLOC_ARENAS = 2


def limit_malloc_arenas(arenas: int = MALLOC_ARENAS) -> bool:
    """Cap glibc's malloc arenas for threads that start from now on; True where it took.

    glibc gives threads their own arenas (up to eight per core), and Streamlit runs each
    visitor's script on a thread of its own: after a class, memory freed in one arena cannot
    serve another, and the server stays hundreds of MB above where it started (measured with
    bench/classroom.py). Two arenas keep the free memory where it can be reused and trimmed.
    The same as ``MALLOC_ARENA_MAX=2`` in the environment, which a host cannot always set."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(_M_ARENA_MAX, arenas))


def malloc_trimmer() -> Callable[[], object]:
    """glibc's ``malloc_trim(0)``, or a no-op where the C library has none (musl, macOS)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return lambda: None
    trim.argtypes = [ctypes.c_size_t]
    return lambda: trim(0)


def collect_periodically() -> None:
    # Memory freed by Python and torch stays with the C allocator (in its arenas, one per
    # thread) until it is trimmed: after a class leaves, trimming hands it back to the system.
    trim = malloc_trimmer()
    while True:
        time.sleep(COLLECT_EVERY_S)
        try:
            # Their memory, and the uploads of sessions that vanished, are freed by the
            # collections that follow.
            upkeep.end_expired_sessions(then=uploads.sweep)
        except Exception:  # upkeep must never stop
            _LOG.warning("upkeep: ending expired sessions failed", exc_info=True)
        _wait_for_a_quiet_moment()
        gc.collect()
        trim()


def _wait_for_a_quiet_moment() -> None:
    """A full collection holds the interpreter for a tenth of a second and more with a class
    on the server; started in the middle of a move, every phone still waiting for its page
    waits that much longer. Wait (at most :data:`QUIET_WAIT_S`) until nothing registered
    with :func:`components.upkeep.busy_while` is going on."""
    give_up = time.monotonic() + QUIET_WAIT_S
    while upkeep.busy() and time.monotonic() < give_up:
        time.sleep(QUIET_CHECK_S)


def warm_rooms() -> list[str]:
    """Run every room's registered warm-up (importing the rooms registers them: the default
    classifier, the shape explorer's default analysis); the names of those that failed."""
    import_rooms()
    return upkeep.run_warm_ups()


def warm_slow_parts() -> None:
    """The sandbox's zygote, then every room's warm-up; then freeze what they loaded."""
    try:
        from torchatlas.sandboxed import shared_pool

        # Every room's jobs first, so the zygote starts once, with all the jobs pages run.
        shared_pool().warm_up(wait=True)
    except Exception:  # the shapes page shows the sandbox's health itself
        _LOG.warning("warm: the sandbox did not start", exc_info=True)
    warm_rooms()
    freeze_long_lived()  # the model and what loading it imported live as long as the server
    _warmed.set()


def wait_until_warm(timeout_s: float) -> bool:
    """Block until the background warm-up has finished (True) or ``timeout_s`` passed."""
    return _warmed.wait(timeout_s)


def _claim_start() -> bool:
    """True for the one caller that starts the warm-up; False for every later one."""
    with _IMPORT_LOCK:
        if _started.is_set():
            return False
        _started.set()
    # A daemon: it holds nothing that needs tearing down.
    threading.Thread(target=collect_periodically, name="torchatlas-gc", daemon=True).start()
    return True


def warm_server() -> None:
    """Import the rooms (serialised), and start warming the sandbox and the classifier once."""
    import_rooms()
    if _claim_start():
        # Not a daemon: the interpreter waits for it at exit instead of tearing torch down
        # under a thread that is still loading a model (a C++ "terminate called" abort).
        threading.Thread(target=warm_slow_parts, name="torchatlas-warm", daemon=False).start()


def warm_before_serving() -> None:
    """Everything :func:`warm_server` starts, finished before this returns."""
    import_rooms()
    if _claim_start():
        warm_slow_parts()
        leave_full_collections_to_the_timer()
    else:
        wait_until_warm(600)


@contextlib.asynccontextmanager
async def server_lifespan(_app: object) -> AsyncIterator[None]:
    """The ``st.App`` lifespan (app.py): the server warms up before it takes its first visitor.

    The server answers no request until this yields, so "started" means ready: the first
    visitor's analysis or classification does not wait for imports, the sandbox or a model.
    The work runs in a thread, off the event loop."""
    await asyncio.to_thread(warm_before_serving)
    yield
