"""Process-wide memos: bounded mappings and the content key of a directory's files.

A process that runs the pipeline many times (the test suite, ``casetest``, a CI job validating
several renders) loads the same rules, CRDs and templates again; these let each be compiled once
per distinct content. Only results that are never changed after they are built are kept (frozen
rules, loaded CRDs, compiled template code), so sharing them is safe.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable, TypeVar

K = TypeVar("K")
V = TypeVar("V")
ContentKey = tuple[str, tuple[tuple[str, bytes], ...]]


class Bounded(dict[K, V]):
    """A dict of at most ``limit`` entries: a new key beyond it pushes out the oldest one."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: K, value: V) -> None:
        if key not in self and len(self) >= self.limit:
            del self[next(iter(self))]
        super().__setitem__(key, value)


class Memo(dict[K, V]):
    """``compute(key)`` once per distinct key, for values that repeat across thousands of objects: a
    hit is a plain dict lookup, in C (``__missing__`` runs only for a new key). Emptied when it holds
    ``limit`` keys, so memory stays bounded at no cost per hit. A key whose ``compute`` raises is not
    kept."""

    def __init__(self, compute: Callable[[K], V], limit: int) -> None:
        super().__init__()
        self.compute, self.limit = compute, limit

    def __missing__(self, key: K) -> V:
        if len(self) >= self.limit:
            self.clear()
        value = self[key] = self.compute(key)
        return value


def content_key(root: Path, files: Iterable[Path]) -> ContentKey | None:
    """``root`` with the path and bytes of each of ``files`` (any edit is a new key); ``None`` when
    one cannot be read: the loader then words the problem and nothing is memoised."""
    try:
        return str(root), tuple((str(path), path.read_bytes()) for path in files)
    except OSError:
        return None
