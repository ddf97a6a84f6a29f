"""Stage timings for ``-v``: the pipeline marks each stage; the CLI prints them at the end.

A module-level record, not an argument threaded through every stage, because a run is one process
and one pipeline; nothing is recorded unless a stage is entered, and entering costs two clock reads.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

START = time.perf_counter()
STAGES: list[tuple[str, float]] = []
NOTES: list[str] = []  # a choice between two ways of doing a stage's job, when the other one was taken


def note(text: str) -> None:
    if text not in NOTES:
        NOTES.append(text)


@contextmanager
def stage(name: str) -> Iterator[None]:
    began = time.perf_counter()
    try:
        yield
    finally:
        STAGES.append((name, time.perf_counter() - began))


def elapsed() -> float:
    return time.perf_counter() - START


def reset() -> None:
    global START
    START = time.perf_counter()
    STAGES.clear()
    NOTES.clear()
