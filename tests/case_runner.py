"""The fixture-case runner lives in the package now (:mod:`gpustack_render.casetest`, also behind
``gpustack-render test``); this module re-exports it for the pytest driver and older imports.

The pytest driver keeps running each case through a child process (``subprocess_invoker``, the
default of ``run_case``), so the fixtures exercise the real CLI end to end.
"""

from __future__ import annotations

from typing import Any

import gpustack_render.casetest as _impl
from gpustack_render.casetest import *  # noqa: F401,F403


def __getattr__(name: str) -> Any:  # the private helpers too (``case_runner._header``)
    return getattr(_impl, name)
