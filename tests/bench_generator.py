"""The benchmark's generators (tests/bench/gen_snapshot.py and gen_workloads.py, scripts, not a
package) loaded once as modules, for the tests that generate realistic inputs in process."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from types import ModuleType

GEN_PATH = Path(__file__).resolve().parent / "bench" / "gen_snapshot.py"
WORKLOAD_GEN_PATH = Path(__file__).resolve().parent / "bench" / "gen_workloads.py"


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@lru_cache(maxsize=None)
def load_generator() -> ModuleType:
    return _load(GEN_PATH, "gen_snapshot_under_test")


@lru_cache(maxsize=None)
def load_workload_generator() -> ModuleType:
    """tests/bench/gen_workloads.py (the admit row's Workloads) as a module."""
    return _load(WORKLOAD_GEN_PATH, "gen_workloads_under_test")
