"""Case files: ``case.yaml`` read and validated into a :class:`Case` (its ``expect:`` selection
included), and the case folders found under a path. The format is described in the package's
docstring (:mod:`gpustack_render.casetest`)."""

from __future__ import annotations

import dataclasses
import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import AbstractSet, Any, Sequence

from gpustack_render.casetest import admission
from gpustack_render.snapshot import yamlread

CASE_FILE = "case.yaml"
EXPECTED_FILE = "expected.yaml"
COMMANDS = ("render", "catalog", "node-patches", "admit")
LIST_COMMANDS = ("render", "catalog")
ADMIT = "admit"

_CASE_FIELDS = {"description", "command", "snapshot", "set", "rules", "expectExitCode", "expectStderr", "expect",
                "chain", "workloads", "reserve"}
_ADMIT_FIELDS = ("chain", "workloads", "reserve")
_EXPECT_FIELDS = {"kinds", "names"}


class CaseDefinitionError(Exception):
    """A case folder that cannot be run as written (bad case.yaml, missing files, bad golden)."""


@dataclass(frozen=True)
class Selection:
    """Which output objects a case compares (``expect:``); empty fields select everything."""

    kinds: tuple[str, ...] = ()
    names: tuple[str, ...] = ()

    @property
    def everything(self) -> bool:
        return not self.kinds and not self.names

    def selects(self, command: str, item: Any) -> bool:
        """Whether ``item`` (an object, or a node-patches entry) is one the case is about."""
        if self.everything:
            return True
        if not isinstance(item, dict):
            return True  # no identity: kept, so the comparison reports it
        if command in LIST_COMMANDS:
            meta = item.get("metadata")
            kind, name = item.get("kind"), meta.get("name") if isinstance(meta, dict) else None
        else:
            kind, name = None, item.get("node")
        if self.kinds and kind not in self.kinds:
            return False
        return not self.names or (isinstance(name, str) and any(fnmatch.fnmatchcase(name, g) for g in self.names))

    def describe(self) -> str:
        parts = ([f"kinds {', '.join(self.kinds)}"] if self.kinds else []) + \
                ([f"names {', '.join(self.names)}"] if self.names else [])
        return "; ".join(parts)


@dataclass(frozen=True)
class Case:
    name: str
    path: Path
    description: str
    command: str = "render"
    snapshot: tuple[str, ...] = ()
    set: tuple[str, ...] = ()
    rules: str | None = None
    expect_exit_code: int = 0
    expect_stderr: tuple[str, ...] = ()
    expect: Selection = Selection()
    chain: str = "rendered"  # admit only, like workloads and reserve
    workloads: tuple[str, ...] = ()
    reserve: tuple[str, ...] = ()

    @property
    def expected_path(self) -> Path:
        return self.path / EXPECTED_FILE

    @property
    def output_exit_codes(self) -> tuple[int, ...]:
        """The exit codes that come with output to compare: 0, and for ``admit --chain compare`` 1
        (some outcome differs)."""
        return (0, 1) if self.command == ADMIT and self.chain == "compare" else (0,)


def _string_list(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise CaseDefinitionError(f"{where}: must be a list of strings")
    return tuple(raw)


def load_case(path: Path) -> Case:
    """Read and validate ``<path>/case.yaml``."""
    path = Path(path)
    case_file = path / CASE_FILE
    where = str(case_file)
    try:
        raw = yamlread.document(case_file.read_text(encoding="utf-8"))
    except (OSError, yamlread.Invalid) as err:
        raise CaseDefinitionError(f"{where}: cannot read: {err}") from err
    _check_fields(raw, _CASE_FIELDS, where, "must be a mapping")
    description = raw.get("description")
    if not isinstance(description, str) or not description.strip():
        raise CaseDefinitionError(f"{where}: description: required, a non-empty string")
    command = raw.get("command", "render")
    if command not in COMMANDS:
        raise CaseDefinitionError(f"{where}: command: {command!r} is not one of {', '.join(COMMANDS)}")
    snapshot = _paths(raw, "snapshot", path, where)
    if not snapshot:
        raise CaseDefinitionError(f"{where}: snapshot: required, at least one path")
    sets = _assignments(raw, "set", where)
    rules = raw.get("rules")
    if rules is not None:
        if not isinstance(rules, str) or not (path / rules).is_dir():
            raise CaseDefinitionError(f"{where}: rules: {rules!r} is not a directory (relative to {path})")
    exit_code = raw.get("expectExitCode", 0)
    if not isinstance(exit_code, int) or isinstance(exit_code, bool) or exit_code < 0:
        raise CaseDefinitionError(f"{where}: expectExitCode: must be a non-negative integer")
    stderr = _string_list(raw.get("expectStderr"), f"{where}: expectStderr")
    case = Case(name=path.name, path=path, description=description.strip(), command=command,
                snapshot=snapshot, set=sets, rules=rules, expect_exit_code=exit_code, expect_stderr=stderr,
                expect=_load_selection(raw.get("expect"), command, f"{where}: expect"))
    return _admit_fields(case, raw, where) if command == ADMIT else _no_admit_fields(case, raw, where)


def _paths(raw: dict[str, Any], key: str, path: Path, where: str) -> tuple[str, ...]:
    """A list of paths relative to the case folder, each of which exists."""
    paths = _string_list(raw.get(key), f"{where}: {key}")
    for rel in paths:
        if not (path / rel).exists():
            raise CaseDefinitionError(f"{where}: {key}: {rel!r} does not exist (relative to {path})")
    return paths


def _assignments(raw: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    """A list of ``NAME=VALUE`` strings (``set``, ``reserve``)."""
    items = _string_list(raw.get(key), f"{where}: {key}")
    for item in items:
        if "=" not in item:
            raise CaseDefinitionError(f"{where}: {key}: {item!r} is not NAME=VALUE")
    return items


def _admit_fields(case: Case, raw: dict[str, Any], where: str) -> Case:
    """``admit``'s own fields: ``chain``, ``workloads`` (paths), ``reserve`` (``RESOURCE=QTY``)."""
    chain = raw.get("chain", "rendered")
    if chain not in admission.CHAINS:
        raise CaseDefinitionError(f"{where}: chain: {chain!r} is not one of {', '.join(admission.CHAINS)}")
    if not case.expect.everything:
        raise CaseDefinitionError(f"{where}: expect: admit compares every Workload it lists (the golden's "
                                  f"`workloads`), so there is nothing to select")
    if case.expect_exit_code == 1 and chain != "compare":
        raise CaseDefinitionError(f"{where}: expectExitCode: admit exits 1 only with chain: compare")
    return dataclasses.replace(case, chain=chain, workloads=_paths(raw, "workloads", case.path, where),
                               reserve=_assignments(raw, "reserve", where))


def _no_admit_fields(case: Case, raw: dict[str, Any], where: str) -> Case:
    given = [key for key in _ADMIT_FIELDS if key in raw]
    if given:
        raise CaseDefinitionError(f"{where}: {', '.join(given)}: only for command: admit")
    return case


def _check_fields(raw: Any, known: AbstractSet[str], where: str, not_mapping: str) -> None:
    """A case-file mapping: a mapping, with no field outside ``known``."""
    if not isinstance(raw, dict):
        raise CaseDefinitionError(f"{where}: {not_mapping}")
    unknown = sorted(set(raw) - known)
    if unknown:
        raise CaseDefinitionError(f"{where}: unknown field(s) {', '.join(unknown)} "
                                  f"(known: {', '.join(sorted(known))})")


def _load_selection(raw: Any, command: str, where: str) -> Selection:
    if raw is None:
        return Selection()
    _check_fields(raw, _EXPECT_FIELDS, where, "must be a mapping with kinds and/or names")
    selection = Selection(kinds=_string_list(raw.get("kinds"), f"{where}.kinds"),
                          names=_string_list(raw.get("names"), f"{where}.names"))
    if selection.everything:
        raise CaseDefinitionError(f"{where}: selects nothing in particular (give kinds and/or names, or drop it)")
    if selection.kinds and command not in LIST_COMMANDS:
        raise CaseDefinitionError(f"{where}.kinds: {command} prints patch entries, not objects (use names)")
    return selection


def case_dirs(root: Path) -> list[Path]:
    """Every direct sub-folder of ``root`` (each must be a case), sorted by name."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.name)


def discover(root: Path) -> list[Case]:
    return [load_case(p) for p in case_dirs(root)]


def collect(paths: Sequence[Path]) -> list[Path]:
    """Case folders: a PATH holding ``case.yaml`` is one case, any other folder holds cases."""
    found: list[Path] = []
    for path in paths:
        path = Path(path)
        if (path / CASE_FILE).is_file():
            found.append(path)
        else:
            found.extend(case_dirs(path))
    unique: dict[Path, Path] = {}
    for path in found:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())
