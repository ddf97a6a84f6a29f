"""The jinja2 sandbox that templates run in, bounded in time and size.

Templates are admin input reviewed in pull requests, but a typo such as ``range(10**9)`` or a nested
loop must end in a clear error within seconds, not in a hang or an out-of-memory kill in CI.
``SandboxedEnvironment`` already blocks unsafe attribute access; this adds: ``range()`` capped,
``*`` and ``**`` checked before they build a huge string, list or number, and a wall-clock budget
for a whole rendering pass (a timer signal, so only where signals can be delivered: the main thread).
"""

from __future__ import annotations

import dataclasses
import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from jinja2.exceptions import SecurityError, TemplateError
from jinja2.runtime import Context
from jinja2.sandbox import SandboxedEnvironment

# What an expression over admin input can raise when it fails on its data: jinja2's own errors (an
# undefined name, a sandbox limit), and Python's from the operators and filters it calls.
EXPRESSION_ERRORS = (TemplateError, ArithmeticError, LookupError, TypeError, ValueError, AttributeError,
                     RecursionError)
MAX_RANGE = 10_000          # items one range() may produce
MAX_REPEAT = 1_000_000      # characters / items a `*` repetition may produce
MAX_POWER_BITS = 4_096      # bits a `**` result may have


# A dataclass field not starting with ``_`` is an attribute the sandbox always allows (its checks look
# at the name and at the object's type, never at a data value's content), so plan items' fields are
# read without them: 45,000 reads at 10,000 Nodes. Values of other types take the sandbox's way.
DATA_VALUES = frozenset({str, int, bool, float, type(None), dict, list, tuple})
_NO_FIELDS: frozenset[str] = frozenset()
_FIELDS: dict[type, frozenset[str]] = {}


def public_fields(cls: type) -> frozenset[str]:
    """The public dataclass fields of instances of ``cls`` (none for other classes)."""
    fields = _FIELDS.get(cls)
    if fields is None:
        fields = _NO_FIELDS
        if dataclasses.is_dataclass(cls) and not issubclass(cls, type):
            fields = frozenset(f.name for f in dataclasses.fields(cls) if not f.name.startswith("_"))
        elif isinstance(struct_fields := getattr(cls, "__struct_fields__", None), tuple):  # a msgspec.Struct
            fields = frozenset(name for name in struct_fields if not name.startswith("_"))
        _FIELDS[cls] = fields
    return fields


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

    def getattr(self, obj: Any, attribute: str) -> Any:
        if attribute in public_fields(type(obj)):
            value = getattr(obj, attribute)
            if type(value) in DATA_VALUES:
                return value
        return super().getattr(obj, attribute)

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
