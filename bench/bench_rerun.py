"""What the garbage collector costs every visitor's rerun, with the app fully loaded.

Streamlit's default runs a full collection after every script run (``runner.postScriptGC``).
With torch, the rooms and a model loaded, each such collection walks the whole heap while the
GIL is held, and on a server every other visitor waits for it. The app turns that off and
freezes what lives as long as the process (components/warm.py). This benchmark measures, in
one process and one run:

a full collection with a few visitors' sessions open, by default and once everything loaded at
start-up is frozen. (A rerun under AppTest is not timed here: it does not run Streamlit's
post-run collection, so it would show neither cost.)

Run: ``python -m bench.bench_rerun``. Exits non-zero when a frozen full collection is not at least
``SPEED_UP_TARGET`` times faster than the default one.
"""

from __future__ import annotations

import gc
import sys

from bench.harness import median_time, open_page

RUNS = 9
SESSIONS = ("views/strides.py", "views/classify.py", "views/devices.py", "views/home.py") * 2
SPEED_UP_TARGET = 3.0


def _collection_s() -> float:
    return median_time(lambda: gc.collect(2), RUNS)


def main() -> int:
    first = open_page(SESSIONS[0])  # the first visitor starts the warm-up
    from components.warm import wait_until_warm

    # The warm-up (sandbox, classifier) freezes what start-up loaded when it ends.
    if not wait_until_warm(300):
        print("the warm-up did not finish")
        return 1
    # Later visitors' sessions, as on a server with a few students: their state stays alive.
    sessions = [first, *(open_page(script) for script in SESSIONS[1:])]
    walked_frozen = len(gc.get_objects())
    frozen = _collection_s()
    gc.unfreeze()  # Streamlit's default: nothing frozen
    walked_default = len(gc.get_objects())
    default = _collection_s()
    ratio = frozen / default
    print(f"{len(sessions)} sessions open; objects a full collection walks: "
          f"{walked_default:,} by default, {walked_frozen:,} with start-up frozen")  # fmt: skip
    print("one full collection (Streamlit runs one after every script run by default):")
    print(f"  default {default * 1e3:.1f} ms, start-up frozen {frozen * 1e3:.1f} ms, "
          f"ratio {ratio:.3f} (target ≤ {1 / SPEED_UP_TARGET:.2f})")  # fmt: skip
    ok = ratio <= 1 / SPEED_UP_TARGET
    print("OK" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
