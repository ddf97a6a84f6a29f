"""The jinja2 sandbox that templates run in, bounded in time and size.

Templates are admin input reviewed in pull requests, but a typo such as ``range(10**9)`` or a nested
loop must end in a clear error within seconds, not in a hang or an out-of-memory kill in CI.
``SandboxedEnvironment`` already blocks unsafe attribute access; this adds: ``range()`` capped,
``*`` and ``**`` checked before they build a huge string, list or number, and a wall-clock budget
for a whole rendering pass (a timer signal, so only where signals can be delivered: the main thread).
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from jinja2.exceptions import SecurityError
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment

MAX_RANGE = 10_000          # items one range() may produce
MAX_REPEAT = 1_000_000      # characters / items a `*` repetition may produce
MAX_POWER_BITS = 4_096      # bits a `**` result may have


def bounded_range(*args: int) -> range:
    rng = range(*args)
    if len(rng) > MAX_RANGE:
        raise SecurityError(f"range() of {len(rng):,} items is over the sandbox's limit of {MAX_RANGE:,}")
    return rng


class BoundedSandbox(SandboxedEnvironment):
    intercepted_binops = frozenset(["*", "**"])

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.globals["range"] = bounded_range

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            _check_repeat(left, right)
            _check_repeat(right, left)
            return left * right
        if isinstance(left, int) and isinstance(right, int) and right > 0 \
                and max(abs(left), 2).bit_length() * right > MAX_POWER_BITS:
            raise SecurityError(f"{left} ** {right} is over the sandbox's size limit")
        return left ** right


def _check_repeat(sequence: Any, times: Any) -> None:
    if isinstance(sequence, (str, list, tuple)) and isinstance(times, int) \
            and len(sequence) * times > MAX_REPEAT:
        raise SecurityError(f"repeating a sequence of {len(sequence):,} items {times:,} times is over the "
                            f"sandbox's limit of {MAX_REPEAT:,}")


class TimeBudgetExceeded(SecurityError):
    """The template pass ran longer than its budget (a loop that does not end in time)."""


@contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Raise :class:`TimeBudgetExceeded` inside the block once ``seconds`` have passed."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expire(_signum: int, _frame: Any) -> None:
        raise TimeBudgetExceeded(f"rendering took longer than {seconds:g} s (a loop too large for the sandbox)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
