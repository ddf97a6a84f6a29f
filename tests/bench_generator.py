"""The benchmark's snapshot generator (tests/bench/gen_snapshot.py, a script, not a package) loaded
once as a module, for the tests that generate realistic snapshots in process."""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from types import ModuleType

GEN_PATH = Path(__file__).resolve().parent / "bench" / "gen_snapshot.py"
WORKLOAD_GEN_PATH = Path(__file__).resolve().parent / "bench" / "gen_workloads.py"


@lru_cache(maxsize=None)
def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_snapshot_under_test", GEN_PATH)
    assert spec is not None and spec.loader is not None, GEN_PATH
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@lru_cache(maxsize=None)
def load_workload_generator() -> ModuleType:
    """tests/bench/gen_workloads.py (the admit row's Workloads) as a module."""
    spec = importlib.util.spec_from_file_location("gen_workloads_under_test", WORKLOAD_GEN_PATH)
    assert spec is not None and spec.loader is not None, WORKLOAD_GEN_PATH
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
