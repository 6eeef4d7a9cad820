"""Class mode's share of a server's start-up warm-up (``components/warm.py`` imports this
module with the rooms, and the lifespan runs what it registers before the first visitor).

A replica that no teacher has visited yet used to pay for its first student's join: the
lessons load (torch answers each question once per process, about half a second on an idle
core) and, on PostgreSQL, the engine connects and checks the schema; a class joining that
replica together waited seconds for it (a join p95 of 3.1 s on the second of two replicas,
0.4 s on the teacher's). Both happen here instead."""

from __future__ import annotations

import os

from components import upkeep


@upkeep.warm_up("classmode")
def warm_class_mode() -> None:
    from torchatlas.classmode import ClassStore
    from torchatlas.lessons import load_all

    load_all()
    # A database server only: the default SQLite file is created on first use, as the README
    # promises (opening it takes milliseconds; a start-up must not write to the home folder).
    if os.environ.get("ATLAS_DATABASE_URL", "").strip():
        ClassStore().open()
