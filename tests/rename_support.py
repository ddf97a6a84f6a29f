"""Helpers for tests/test_rename_property.py: consistent renamings of the operator's vocabulary.

A :class:`Renaming` is one consistent string substitution. It is applied to a copy of ``rules/``,
``templates/`` and the snapshot fixtures, to the ``--set`` names, and to the tool's output for the
original inputs. Promise 1 of the project ("rules/ is the single source of truth") holds exactly
when the output for the renamed inputs equals the renamed output for the original inputs, once
every ``fnv64-`` + 16 hex digits is replaced by a placeholder on both sides (the hashes of renamed
names differ, nothing else may).

Where each substitution applies, and why:

* Plain substitutions (the domain, the namespace, the name prefixes) apply everywhere: they are
  never ordinary words, so any occurrence in a snapshot is the operator's vocabulary. The domain
  takes the operator's API group (``worker.gpustack.ai``: Devices, InstanceType) with it, in the
  snapshot's ``apiVersion`` too, as in a cluster whose CRDs were renamed with the operator.
* Setting names apply as whole tokens (a setting name inside a longer dash-joined word is not it).
* The sentinel ``generic`` (the general group of a CPU that is not manufacturer-aware, the name
  part of the generic CPU pool) *is* an ordinary word: real snapshots hold it in kernel versions
  (``6.8.0-49-generic``), OS images, CPU model names, free-text annotations. Renaming it there
  would change the input's meaning, not its vocabulary. So in rules/ and templates/ it is renamed
  as a whole token; in snapshots only where the operator wrote the sentinel: an InstanceType's
  ``generalGroup`` value and a name made by the naming rules (the old pool prefix followed by the
  sentinel, ``gpustack--generic``); in the outputs as a whole token, which is right only while the
  snapshots used hold ``generic`` nowhere else -- :func:`stray_sentinels` checks that precondition.
* Never substituted (:data:`PROTECTED`): the rule files' own ``apiVersion`` group
  ``render.gpustack.ai`` and the tool's name ``gpustack-render``. They name this tool's file format
  and program, not the operator's vocabulary; an admin renaming the operator keeps using them.
"""

from __future__ import annotations

import functools
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpustack_render.k8s import fnv1a64_hex

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures"
FNV = re.compile(r"fnv64-[0-9a-f]{16}")
PLACEHOLDER = "fnv64-<hash>"
# Diagram node ids of `diff --format markdown` (views/graph.py: a prefix + 10 hex digits of SHA-1
# of the object's name): hashes of renamed names too.
DIAGRAM_ID = re.compile(r"(?<![A-Za-z0-9_])([a-z]+)_[0-9a-f]{10}(?![0-9a-f])")
SENTINEL = "generic"
OLD_POOL_PREFIX = "gpustack--"
PROTECTED: tuple[str, ...] = ("render.gpustack.ai", "gpustack-render")
TEXT_SUFFIXES = {".yaml", ".yml", ".json", ".j2", ".md"}
# Files of fixtures/ that are expected outputs, not inputs: never copied.
SKIPPED_FIXTURE_FILES = {"expected.yaml"}


def setting_names(rules_dir: Path = REPO / "rules") -> list[str]:
    """The settings the rules know, read from rules/settings.yaml (the one list of them).

    Reading them (rather than listing them here) keeps the test honest when a setting is added.
    """
    doc = yaml.safe_load((rules_dir / "settings.yaml").read_text(encoding="utf-8"))
    defaults = doc.get("defaults") if isinstance(doc, dict) else None
    if not isinstance(defaults, dict) or not defaults:
        raise AssertionError(f"{rules_dir / 'settings.yaml'}: no 'defaults' mapping of settings to rename")
    return [str(name) for name in defaults]


def renamed_setting(name: str) -> str:
    """A new, valid and unambiguous name: ``acme-`` + the initials + the length (no old word left)."""
    initials = "".join(word[0] for word in name.split("-") if word)
    return f"acme-opt-{initials}{len(name)}"


@dataclass(frozen=True)
class Renaming:
    """One consistent substitution set; see the module docstring for where each part applies."""

    name: str
    plain: tuple[tuple[str, str], ...] = ()
    settings: tuple[tuple[str, str], ...] = ()
    sentinel: str | None = None
    _cache: dict[str, re.Pattern[str]] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def _pattern(self, scope: str) -> re.Pattern[str]:
        """One alternation per scope, applied in a single pass so that no replacement is renamed
        again; protected words and longer literals come first so they win at the same position."""
        if scope in self._cache:
            return self._cache[scope]
        parts: list[str] = [re.escape(word) for word in PROTECTED]
        parts += [re.escape(old) for old, _ in sorted(self.plain, key=lambda p: -len(p[0]))]
        parts += [rf"(?<![A-Za-z0-9-]){re.escape(old)}(?![A-Za-z0-9-])" for old, _ in self.settings]
        if self.sentinel is not None:
            token = rf"(?<![A-Za-z0-9]){SENTINEL}(?![A-Za-z0-9])"
            if scope == "snapshot":
                parts += [rf"(?<=generalGroup: ){token}", rf'(?<="generalGroup": "){SENTINEL}(?=")',
                          rf"(?<={re.escape(OLD_POOL_PREFIX)}){SENTINEL}(?![A-Za-z0-9])"]
            else:
                parts.append(token)
        pattern = re.compile("|".join(f"(?:{part})" for part in parts))
        self._cache[scope] = pattern
        return pattern

    def _replacement(self, match: re.Match[str]) -> str:
        text = match.group(0)
        if text in PROTECTED:
            return text
        for old, new in (*self.plain, *self.settings):
            if text == old:
                return new
        if text == SENTINEL and self.sentinel is not None:
            return self.sentinel
        raise AssertionError(f"unexpected match {text!r}")

    def apply(self, text: str, scope: str) -> str:
        """Rename ``text``; ``scope`` is ``tree`` (rules/templates), ``snapshot`` or ``output``."""
        assert scope in ("tree", "snapshot", "output"), scope
        return self._pattern(scope).sub(self._replacement, text)

    def old_words(self) -> list[str]:
        """What this renaming replaces (identity pairs excluded)."""
        words = [old for old, new in (*self.plain, *self.settings) if old != new]
        return words + ([SENTINEL] if self.sentinel is not None else [])

    def leftovers(self, text: str) -> list[str]:
        """The words of ``text`` that still hold old vocabulary (protected words aside): in the
        output for renamed inputs they point straight at a literal the code still holds."""
        kept = [*PROTECTED, *(old for old, new in self.plain if old == new)]
        found: dict[str, int] = {}
        for word in NAME_TOKEN.findall(text):
            rest = word
            for keep in kept:
                rest = rest.replace(keep, "\x00")
            if any(old in rest for old in self.old_words()):
                found[word] = found.get(word, 0) + 1
        return [f"{word} (x{count})" for word, count in sorted(found.items(), key=lambda item: -item[1])]

    def set_arg(self, assignment: str) -> str:
        """A ``--set NAME=VALUE`` with NAME renamed (values are never vocabulary)."""
        name, sep, value = assignment.partition("=")
        return dict(self.settings).get(name, name) + sep + value


def copy_renamed(src: Path, dst: Path, renaming: Renaming | None, scope: str) -> None:
    """Copy a directory tree, renaming every text file and the hashes of renamed names in it
    (``renaming=None``: a plain copy)."""
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if path.is_dir() or path.name in SKIPPED_FIXTURE_FILES or "__pycache__" in rel.parts:
            continue
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if renaming is not None and path.suffix in TEXT_SUFFIXES:
            original = path.read_text(encoding="utf-8")
            renamed = translate_hashes(renaming.apply(original, scope), renaming, scope)
            target.write_text(renamed, encoding="utf-8")
        else:
            shutil.copyfile(path, target)


def build_workspace(root: Path, renaming: Renaming | None, *, rename_rules: bool = True,
                    rename_templates: bool = True, rename_snapshots: bool = True) -> Path:
    """``root`` gets rules/, templates/ and fixtures/ (renamed or not, each on its own flag).

    Originals are copied too, so both sides of a comparison read files at the same relative
    paths and their diagnostics differ only by the root directory.
    """
    copy_renamed(REPO / "rules", root / "rules", renaming if rename_rules else None, "tree")
    copy_renamed(REPO / "templates", root / "templates", renaming if rename_templates else None, "tree")
    copy_renamed(FIXTURES, root / "fixtures", renaming if rename_snapshots else None, "snapshot")
    return root


def normalise(text: str, root: Path | None = None) -> str:
    """Hashes (and diagram ids) to a placeholder; the workspace root to ``<root>`` (diagnostics
    name files)."""
    if root is not None:
        text = text.replace(str(root), "<root>")
    return DIAGRAM_ID.sub(r"\1_<id>", FNV.sub(PLACEHOLDER, text))


NAME_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@functools.cache
def preimages() -> dict[str, str]:
    """FNV-1a 64 hash → the word it hashes, over every word of fixtures/ and tests/golden/.

    The words of the expected outputs are only candidates: a hash is translated when one of
    them hashes to it, and a wrong candidate cannot produce a matching hash.
    """
    words: set[str] = set()
    for folder in (FIXTURES, REPO / "tests" / "golden"):
        for path in folder.rglob("*"):
            if path.is_file() and path.suffix in TEXT_SUFFIXES:
                words.update(NAME_TOKEN.findall(path.read_text(encoding="utf-8")))
    return {fnv1a64_hex(word): word for word in words}


def translate_hashes(renamed: str, renaming: Renaming, scope: str) -> str:
    """``renamed`` (a renamed text) with each hash of a renamed name re-hashed.

    Objects of a snapshot or a previous render refer to each other by hashed names (a LocalQueue
    ``<prefix>fnv64-<FNV-1a 64 of its ClusterQueue>``); after a rename those must be the hashes of
    the renamed names, or the renamed input would describe another cluster. A hash whose preimage
    is unknown (:func:`preimages`), such as a topology profile of level keys, stays: its preimage
    holds no vocabulary.
    """
    table = preimages()

    def rehash(match: re.Match[str]) -> str:
        word = table.get(match.group(0)[len("fnv64-"):])
        return match.group(0) if word is None else "fnv64-" + fnv1a64_hex(renaming.apply(word, scope))

    return FNV.sub(rehash, renamed)


def canonical(value: Any) -> Any:
    """A parsed document with every order a rename may legitimately change taken out: mapping
    keys and list items sorted (outputs sort label keys, objects and flavors by name)."""
    if isinstance(value, dict):
        return tuple(sorted((repr(canonical(k)), repr(canonical(v))) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(sorted(repr(canonical(item)) for item in value))
    return value


def same_up_to_order(expected: str, actual: str, structured: bool) -> bool:
    """Equal once the order a rename may change is ignored.

    ``structured`` output (a YAML stream or JSON) is compared as parsed documents
    (:func:`canonical`, the stream as a multiset); a text report (diff text, markdown, stderr)
    as the multiset of its lines (:func:`report_lines`: a unified diff's context and hunk headers
    left out, as the order of the lines they count changes with the names). Exact equality is tried
    first by the caller.
    """
    if structured:
        try:
            want = sorted(repr(canonical(doc)) for doc in yaml.safe_load_all(expected))
            got = sorted(repr(canonical(doc)) for doc in yaml.safe_load_all(actual))
        except yaml.YAMLError:
            return False
        return want == got
    return sorted(report_lines(expected)) == sorted(report_lines(actual))


def report_lines(text: str) -> list[str]:
    """A text report's lines without what depends on the order of a unified diff's lines: inside a
    diff (from a ``diff -u``/``--- a/`` line or a markdown ``diff`` fence to the first line that is
    no diff line) the hunk headers and context lines go; added and removed lines stay."""
    kept: list[str] = []
    in_diff = False
    for line in text.splitlines():
        if line.startswith(("diff -u ", "--- a/", "```diff")):
            in_diff = True
        elif in_diff and not line.startswith((" ", "+", "-", "@@")) and line != "":
            in_diff = False
        if in_diff and (line.startswith((" ", "@@")) or line == ""):
            continue
        kept.append(line)
    return kept


def sorted_text(text: str) -> str:
    """A YAML/JSON stream re-dumped with its documents and mapping keys sorted, so the diff shown
    for a failure holds the differences of substance, not those of order (falls back to ``text``)."""
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return text
    docs.sort(key=lambda doc: repr(canonical(doc)))
    return yaml.safe_dump_all(docs, sort_keys=True, default_flow_style=False)


def strip_comments(text: str) -> str:
    """YAML comment text removed (a comment's words never reach any output)."""
    return re.sub(r"(?m)(^|\s)#.*$", r"\1", text)


def stray_sentinels(paths: list[Path]) -> list[str]:
    """Occurrences of the word ``generic`` in snapshot files that are not a sentinel site.

    The output side renames every ``generic`` token; that is only right while the inputs hold
    the word nowhere but at the sites the snapshot substitution renames too.
    """
    probe = Renaming("probe", sentinel="\x00")
    token = re.compile(rf"(?<![A-Za-z0-9]){SENTINEL}(?![A-Za-z0-9])")
    stray: list[str] = []
    for path in paths:
        for number, line in enumerate(strip_comments(path.read_text(encoding="utf-8")).splitlines(), 1):
            left = token.findall(probe.apply(line, "snapshot"))
            if left:
                stray.append(f"{path}:{number}: {line.strip()}")
    return stray
