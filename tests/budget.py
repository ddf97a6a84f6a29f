"""Example budgets of the property tests, and proof that a smaller budget still draws every branch.

Most of a property test's time is hypothesis drawing the example, not the code under test, so the
suite runs each property test on a smaller, *fixed-seed* budget (``derandomize``: the same examples
on every run of the same code, so a failure is reproducible; hypothesis also draws constants from
the modules loaded, so a full run may draw others than one file alone)
next to deterministic tables of the named cases. ``GPUSTACK_RENDER_THOROUGH=1`` gives every
property test its full budget with fresh random examples (a nightly job, or after changing the
code under test).

"Still hits every strategy" is checked, not hoped for: :class:`Branches` tags each alternative of a
``one_of`` and the test asserts, after its examples ran, that every tag was drawn. Only branches
drawn about a hundred times per budget are checked that way; a rarer one gets a deterministic table.
"""

from __future__ import annotations

import os
from typing import Any, Callable, TypeVar

from hypothesis import settings
from hypothesis import strategies as st

THOROUGH_ENV = "GPUSTACK_RENDER_THOROUGH"
T = TypeVar("T")


def thorough() -> bool:
    return os.environ.get(THOROUGH_ENV, "") not in ("", "0")


def budget(quick: int, full: int, **kwargs: Any) -> Callable[[T], T]:
    """``@settings`` with ``quick`` fixed-seed examples, or ``full`` random ones when thorough."""
    if thorough():
        return settings(max_examples=full, deadline=None, **kwargs)
    return settings(max_examples=quick, deadline=None, derandomize=True, database=None, **kwargs)


class Branches:
    """Names the alternatives of a strategy and remembers which of them were drawn."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self.names: list[str] = []

    def tag(self, name: str, strategy: st.SearchStrategy[T]) -> st.SearchStrategy[T]:
        self.names.append(name)

        def seen(value: T) -> T:
            self.seen.add(name)
            return value
        return strategy.map(seen)

    def one_of(self, **named: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(*(self.tag(name, strategy) for name, strategy in named.items()))

    def assert_all_drawn(self) -> None:
        missing = [name for name in self.names if name not in self.seen]
        assert not missing, f"the example budget never drew {missing}: raise it or add them to the tables"
