"""Which file each rule kind comes from: ``--rules DIR`` is an overlay over the built-in rules.

A file of ``DIR`` replaces the built-in file of the same kind (its ``kind:``, not its name); every
other kind is the built-in rules' of this version, so a kind added in a later version is inherited
without a copy. ``rules.yaml`` (``kind: Rules``) with ``inherit: false`` makes ``DIR`` a full copy:
then a kind it lacks is an error. A directory holding no rule file at all is one error, which says
so (and, when it holds Kubernetes objects, that it looks like a snapshot). Every command that takes
``--rules`` loads through :func:`gpustack_render.rules.load_rules`, which resolves here."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from gpustack_render.errors import Problem, UserError
from gpustack_render.rules import schema
from gpustack_render.rules.read import RULE_SUFFIXES, Document, position, read_documents, rule_files, validate
from gpustack_render.rules.resources import default_rules_dir

BUILT_IN = "built-in"
SWITCH_FILE = "rules.yaml"  # where the docs put the kind: Rules switch (any file name works)
# How much of a file is scanned for the kinds it declares (the "no rule file" check): a snapshot
# pointed at by mistake may be large, and its first objects tell what it is.
_SCAN_BYTES = 1 << 20
_KIND = re.compile(r'^\s*(?:-\s+)?"?kind"?\s*:\s*"?([A-Za-z][\w.-]*)', re.M)
_JSON_KIND = re.compile(r'"kind"\s*:\s*"([A-Za-z][\w.-]*)"')  # JSON on one line (``jq -c``) too


@dataclass
class Resolved:
    """The documents per kind (validated) and where each kind came from (a file or the built-in rules)."""
    by_kind: dict[str, Document]
    inherited: list[str] = field(default_factory=list)  # kinds taken from the built-in rules
    inherits: bool = True
    switch_file: str = SWITCH_FILE  # the file that holds the kind: Rules switch


def is_built_in(rules_dir: Path) -> bool:
    return rules_dir.resolve() == default_rules_dir().resolve()


def resolve(rules_dir: Path, problems: list[Problem]) -> Resolved:
    """``rules_dir``'s documents by kind, validated, with the built-in rules of the kinds it has no
    file of unless its ``rules.yaml`` says ``inherit: false``. Problems of the files are appended."""
    if not rules_dir.is_dir():
        raise UserError.single("rules directory not found", file=str(rules_dir))
    check_holds_rules(rules_dir)
    by_kind = one_per_kind(read_documents(rules_dir, problems), problems)
    switch = by_kind.pop(schema.DIRECTORY_KIND, None)
    inherits = switch is None or switch.model is None or bool(switch.model.inherit)
    if not inherits or is_built_in(rules_dir):
        return Resolved(by_kind, [], inherits, Path(switch.file).name if switch is not None else SWITCH_FILE)
    inherited = builtin_documents(set(schema.RULE_KINDS) - set(by_kind))
    by_kind.update(inherited)
    return Resolved(by_kind, sorted(inherited), inherits)


def builtin_documents(kinds: set[str]) -> dict[str, Document]:
    """The built-in rule files of ``kinds`` by kind, each validated; none read when ``kinds`` is
    empty (a directory with a file of every kind)."""
    found: dict[str, Document] = {}
    for doc in read_documents(default_rules_dir(), []) if kinds else []:
        if doc.kind in kinds and doc.kind not in found:
            validate(doc, [])
            found[doc.kind] = doc
    return found


def one_per_kind(documents: list[Document], problems: list[Problem]) -> dict[str, Document]:
    """The documents by kind, each validated; a second file of one kind is a problem at its ``kind``."""
    by_kind: dict[str, Document] = {}
    for doc in documents:
        if doc.kind in by_kind:
            line, col = position(doc.data, ("kind",))
            problems.append(Problem(f"rule kind {doc.kind} is already defined in {by_kind[doc.kind].file}",
                                    file=doc.file, line=line, column=col, path="kind"))
            continue
        by_kind[doc.kind] = doc
        validate(doc, problems)
    return by_kind


def sources_of(resolved: Resolved) -> dict[str, str]:
    """Kind → the file it comes from, or ``built-in`` for an inherited kind (what ``lint`` prints)."""
    return {kind: BUILT_IN if kind in resolved.inherited else doc.file
            for kind, doc in sorted(resolved.by_kind.items())}


def check_holds_rules(rules_dir: Path) -> None:
    """One error for a directory that holds no rule file at all (instead of one per file read as
    rules): a file counts when it declares our apiVersion or a rule kind, so a broken rule file is
    still read and its problems reported where they are."""
    group = schema.API_VERSION.split("/")[0]
    _check_none_unread(rules_dir, group)
    kinds: set[str] = set()
    for path in sorted(p for p in rules_dir.iterdir() if p.is_file() and p.suffix in RULE_SUFFIXES + (".json",)):
        text = _head(path)
        declared = set((_JSON_KIND if path.suffix == ".json" else _KIND).findall(text))
        if path.suffix in RULE_SUFFIXES and (group in text or declared & set(schema.FILE_KINDS)
                                             and "metadata" not in text):  # an object has metadata
            return
        kinds |= {kind for kind in declared if not kind.endswith("List")}
    message = "no rule file in this directory (a rule file is a *.yaml file with apiVersion " \
              f"{schema.API_VERSION}; an overlay holds only the kinds it changes)"
    if kinds:
        message = (f"no rule file in this directory: it holds Kubernetes objects ({', '.join(sorted(kinds))}) "
                   "and looks like a cluster snapshot; pass it as SNAPSHOT, and --rules a directory of rule "
                   f"files (apiVersion {schema.API_VERSION})")
    raise UserError.single(message, file=str(rules_dir))


def _check_none_unread(rules_dir: Path, group: str) -> None:
    """A rule file the reader skips (``naming.json``, ``naming.YAML``) would silently leave its kind
    to the built-in rules of an overlay: one error per such file, naming it."""
    unread = [path for path in sorted(rules_dir.iterdir())
              if path.is_file() and path.suffix not in RULE_SUFFIXES
              and path.suffix.lower() in RULE_SUFFIXES + (".json",) and _declares_rules(path, group)]
    if unread:
        raise UserError([Problem("not read as a rule file (rule files are named *.yaml or *.yml), so its kind "
                                 f"would come from the built-in rules; rename it to {path.stem}.yaml", file=str(path))
                         for path in unread])


def _declares_rules(path: Path, group: str) -> bool:
    """Whether a file names our apiVersion and a rule kind as its ``kind`` (a JSON Schema of the rule
    files, written beside them by ``schema -o``, names the apiVersion but no kind: value)."""
    text = _head(path)
    return group in text and bool(set((_JSON_KIND if path.suffix == ".json" else _KIND).findall(text))
                                  & set(schema.FILE_KINDS))


def _head(path: Path) -> str:
    """The first ``_SCAN_BYTES`` of a file as text ("" when it cannot be read)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(_SCAN_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""
