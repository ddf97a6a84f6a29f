"""``gpustack-render lint``: every problem of every rule file at once, compiler style.

It is :func:`gpustack_render.rules.load_rules` itself (as :func:`~gpustack_render.rules.lint_load`,
which also tells where each kind comes from, from the same one reading of the files) — the same
reading, validation and compiling that ``render`` runs, so ``lint`` is clean exactly when ``render`` accepts the rules, with the same
messages — reported as a result instead of an error.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpustack_render.errors import Problem
from gpustack_render.rules import overlay
from gpustack_render.rules.overlay import BUILT_IN
from gpustack_render.rules.resources import default_rules_dir


@dataclass
class LintResult:
    """What ``lint`` found: the directory, the rule files read and their problems."""
    rules_dir: Path
    files: list[Path]
    problems: list[Problem]
    built_in: bool = False  # no --rules: the packaged rules (whatever directory they live in)
    kinds: dict[str, str] = dataclasses.field(default_factory=dict)  # kind → its file, or built-in

    @property
    def inherited(self) -> list[str]:
        return [kind for kind, source in self.kinds.items() if source == BUILT_IN] if not self.built_in else []

    @property
    def source(self) -> str:
        """Which rules were checked, as the summary line names them: a clean lint of the wrong
        directory (the built-in rules instead of a GitOps repository's) must not pass unnoticed."""
        return BUILT_IN if self.built_in else str(self.rules_dir)

    def origin_lines(self) -> list[str]:
        """For an overlay: which kinds its files give, and which come from the built-in rules."""
        if not self.inherited:
            return []
        own = [f"{kind} ({Path(source).name})" for kind, source in self.kinds.items() if source != BUILT_IN]
        return [f"{self.rules_dir}: {', '.join(own)}", f"{BUILT_IN}: {', '.join(self.inherited)}"]

    @property
    def ok(self) -> bool:
        return not self.problems

    def text(self) -> str:
        lines = [p.format() for p in self.problems] or self.origin_lines()
        if self.problems:
            bad = len({p.file for p in self.problems})
            lines.append(f"{_plural(len(self.problems), 'problem')} in {_plural(bad, 'file')} "
                         f"({_plural(len(self.files), 'rule file')} checked, rules: {self.source})")
        else:
            inherited = f"; {_plural(len(self.inherited), 'kind')} {BUILT_IN}" if self.inherited else ""
            lines.append(f"{_plural(len(self.files), 'rule file')} OK (rules: {self.source}{inherited})")
        return "\n".join(lines) + "\n"

    def as_json(self) -> dict[str, Any]:
        return {
            "rulesDir": str(self.rules_dir), "rules": self.source, "files": [str(f) for f in self.files], "ok": self.ok,
            "kinds": self.kinds,
            "problems": [{"file": p.file, "line": p.line, "column": p.column, "path": p.path or None,
                          "message": p.message, "hint": p.hint or None, "severity": p.severity,
                          "text": p.format()} for p in self.problems],
        }


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def display_dir(rules_dir: Path | None) -> Path:
    """The rules directory as the user should read it: the built-in one relative to the working
    directory when it lies below it (``rules/naming.yaml:9:8``), else as given."""
    if rules_dir is not None:
        return rules_dir
    builtin = default_rules_dir()
    try:
        return builtin.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return builtin


def lint_rules(rules_dir: Path | None = None) -> LintResult:
    """Load every rule file of ``rules_dir`` (default: the built-in rules); collect all problems.

    A missing rules directory is not a lint finding but a usage error (raised)."""
    from gpustack_render.rules import lint_load
    directory = display_dir(rules_dir)
    kinds, found = lint_load(directory)  # (overlay.resolve refuses a missing directory or one of no rules)
    files = overlay.rule_files(directory)
    problems = [dataclasses.replace(p, compiler_style=True) for p in found]
    return LintResult(directory, files, problems, built_in=rules_dir is None, kinds=kinds)
