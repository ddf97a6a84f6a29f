"""Fuzz (issue 11.3): rule files mutated as careless admins would; lint's verdict must hold everywhere.

Each example copies ``rules/`` (in memory), applies one to three seeded mutations — type changes,
deleted or renamed keys, typos, swapped operators and values, invalid regexes and replacements,
arithmetic that fails, broken name formats, a setting renamed in one file only, one of two places
that must agree changed, a file removed, a list item duplicated — and runs the CLI in-process:

- ``lint`` exits 0 or 1, never anything else;
- lint exit 1 ⇒ ``render`` exits 2 with exactly lint's problem lines on stderr;
- lint exit 0 ⇒ ``render`` and ``node-patches`` exit 0 or 1 (render never refuses what lint
  accepted), ``pin`` and ``explain`` of a few targets exit 0, 1 or 2;
- no command ever reports an internal error (exit 3) or a traceback.

A failing example prints its mutations. ``FUZZ_EXAMPLES=5000`` runs more examples (default 78: six
per mutation kind, each kind applied first in turn and checked to have acted; 200 drawn at random
with ``GPUSTACK_RENDER_THOROUGH=1``), ``FUZZ_SEED=N`` another sequence. To stay within ~20 s, one example's rules are loaded once for all
its commands (``load_rules`` memoised per example: the same function every command calls) and
unchanged rule files are parsed once (``rulesyaml.load`` memoised by path and content).
"""

from __future__ import annotations

import copy
import gc
import io
import json
import os
import pickle
import random
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from budget import thorough
from click.testing import CliRunner
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

import gpustack_render.pipeline as pipeline
import gpustack_render.rules as rules_pkg
import gpustack_render.rulesyaml as rulesyaml
from gpustack_render.cli import main
from gpustack_render.rules.expressions import FACTS

REPO = Path(__file__).resolve().parents[1]
RULES = REPO / "rules"
DEMO = REPO / "fixtures" / "demo"
WORKLOADS = REPO / "fixtures" / "pin" / "workloads"
# The suite's budget (tests/budget.py): 6 examples per mutation kind, each kind first in turn;
# GPUSTACK_RENDER_THOROUGH=1 runs 200 (or FUZZ_EXAMPLES) with every mutation drawn at random.
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "200" if thorough() else "78"))
SEED = int(os.environ.get("FUZZ_SEED", "11"))

# Values a careless edit leaves behind (a type change, a quoted number, an empty value ...).
ODD_VALUES: list[Any] = [0, -1, 7, 3, "0", "7", True, False, "true", "", "text", None, 1.5, [], {}, ["x"],
                         {"x": 1}, "{gKey}", "Hold", "None", "HoldAndDrain", "Hld"]
EXPRESSIONS = ["L * vram / 3", "capacity / 0", "P ** M", "M // 0", "M ** M", "capacity * 1.5", "capacity - 1",
               "count", "nodes * count", "capacity // 2", "capacity / 2", "L * M + P * M", "vram // 1024",
               "slices * 100 if overcommit else L * 100", "capacity * M", "M // 10", "manu | length", "54 - 60",
               "capacity |", "capcity * M", "L ~ P", "range(10)", "capacity if capacity else 'x'", "-capacity",
               "2 ** 62 * capacity", "(capacity * M) // 0.5", "capacity % 0", "[capacity]", "vram / 1024"]
PLACEHOLDERS = ["gKey", "gManu", "aKey", "manufacturer", "os", "arch", "count", "profile", "base", "kind",
                "node", "clusterQueue", "queue", "instanceType", "nope", "gkey", "gKey|fnv64a", "aKey|lower",
                "gKey|nope"]
REGEXES = ["([a-z", "(?P<x>a)", "a{2,1}", "*", "(a)(b)", "", "\\"]
REPLACEMENTS = ["\\9", "\\g<name>", "\\1", "\\g<0>", "\\", "x\\2y", "\\g<x>", ""]
OPERATORS = ["Gt", "Ge", "Lt", "Le", "Eq", "Ne", "Gte", "gt", None]

_YAML = YAML(typ="rt")
_YAML.width = 4096


def _load(text: str) -> Any:
    return _YAML.load(text)


def _dump(data: Any) -> str:
    out = io.StringIO()
    _YAML.dump(data, out)
    return out.getvalue()


BASE: dict[str, str] = {p.name: p.read_text(encoding="utf-8") for p in sorted(RULES.iterdir())
                        if p.suffix in (".yaml", ".yml")}
BASE_PARSED: dict[str, Any] = {name: _load(text) for name, text in BASE.items()}  # read-only: for choosing
# An editable copy of an unedited file comes from its pickle (a tenth of a millisecond instead of a
# ruamel parse; it dumps to the same text, comments and order included).
BASE_PICKLED: dict[str, bytes] = {name: pickle.dumps(data) for name, data in BASE_PARSED.items()}


@dataclass
class Mutant:
    """One example: the rule files' texts (None: removed) and what was done to them."""

    rng: random.Random
    texts: dict[str, str | None] = field(default_factory=lambda: dict(BASE))
    parsed: dict[str, Any] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    first_acted: bool = False  # the first mutation changed something

    def data(self, name: str) -> Any:
        """The file's data to edit (parsed on first edit)."""
        if name not in self.parsed:
            text = self.texts[name]
            self.parsed[name] = pickle.loads(BASE_PICKLED[name]) if text == BASE.get(name) else _load(text or "")
        return self.parsed[name]

    def view(self, name: str) -> Any:
        """The file's data to choose from, without parsing an unedited file again."""
        return self.parsed[name] if name in self.parsed else BASE_PARSED[name]

    def files(self) -> list[str]:
        return sorted(n for n, t in self.texts.items() if t is not None)

    def any_file(self) -> str:
        return self.rng.choice(self.files())

    def finish(self) -> dict[str, str | None]:
        for name, data in self.parsed.items():
            if self.texts[name] is not None:
                self.texts[name] = _dump(data)
        return self.texts


Slot = tuple[Any, Any, tuple[Any, ...]]  # (container, key or index, path from the file's root)


def slots(node: Any, path: tuple[Any, ...] = ()) -> Iterator[Slot]:
    """Every (container, key) of a parsed rule file, depth first."""
    items = list(node.items()) if isinstance(node, dict) else list(enumerate(node)) if isinstance(node, list) else []
    for key, value in items:
        yield node, key, path + (key,)
        yield from slots(value, path + (key,))


def _pick(m: Mutant, keep: Callable[[Slot], bool], files: list[str] | None = None) -> tuple[str, Slot] | None:
    """A random slot that ``keep`` accepts, in a random file that has one; resolved in the editable copy."""
    names = files or m.files()
    m.rng.shuffle(names)
    for name in names:
        found = [s for s in slots(m.view(name)) if keep(s)]
        if found:
            path = m.rng.choice(found)[2]
            node: Any = m.data(name)
            for part in path[:-1]:
                node = node[part]
            return name, (node, path[-1], path)
    return None


def _where(name: str, slot: Slot) -> str:
    return f"{name}:{'.'.join(map(str, slot[2]))}"


def typo(rng: random.Random, word: str) -> str:
    if not word:
        return "x"
    i = rng.randrange(len(word))
    choice = rng.randrange(5)
    if choice == 0 and len(word) > 1:
        return word[:i] + word[i + 1:]                                   # a dropped letter
    if choice == 1 and i + 1 < len(word):
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]          # swapped letters
    if choice == 2:
        return word[:i] + word[i] + word[i:]                             # a doubled letter
    if choice == 3:
        return word.swapcase() if word.lower() != word.upper() else word + "x"
    return word[:i] + rng.choice("aeiouxz-_. {}") + word[i + 1:]         # a wrong character


def _set(m: Mutant, name: str, slot: Slot, value: Any, what: str) -> None:
    container, key, _ = slot
    container[key] = value
    m.log.append(f"{what} {_where(name, slot)} = {value!r}")


# --- the mutations -----------------------------------------------------------------------------------

def type_change(m: Mutant) -> None:
    if found := _pick(m, lambda s: True):
        _set(m, found[0], found[1], copy.deepcopy(m.rng.choice(ODD_VALUES)), "type change")


def delete_key(m: Mutant) -> None:
    if found := _pick(m, lambda s: True):
        name, (container, key, _) = found
        del container[key]
        m.log.append(f"deleted {_where(name, found[1])}")


def rename_key(m: Mutant) -> None:
    found = _pick(m, lambda s: isinstance(s[0], CommentedMap) and isinstance(s[1], str))
    if found:
        name, (container, key, _) = found
        new = typo(m.rng, key)
        if new in container:
            return
        position = list(container).index(key)
        value = container.pop(key)
        container.insert(position, new, value)
        m.log.append(f"renamed key {_where(name, found[1])} to {new!r}")


def typo_value(m: Mutant) -> None:
    found = _pick(m, lambda s: isinstance(s[0][s[1]], str))
    if found:
        name, slot = found
        _set(m, name, slot, typo(m.rng, str(slot[0][slot[1]])), "typo")


def condition(m: Mutant) -> None:
    """A fact condition edited: operator swapped, value of another type, another fact, a setting."""
    found = _pick(m, lambda s: isinstance(s[0][s[1]], dict) and "fact" in s[0][s[1]])
    if not found:
        return
    name, slot = found
    cond = slot[0][slot[1]]
    action = m.rng.randrange(5)
    if action == 0:
        op = m.rng.choice(OPERATORS)
        if op is None:
            cond.pop("operator", None)
        else:
            cond["operator"] = op
            cond.setdefault("value", m.rng.choice(ODD_VALUES[:12]))
    elif action == 1:
        cond["value"] = copy.deepcopy(m.rng.choice(ODD_VALUES))
        cond.setdefault("operator", m.rng.choice(OPERATORS[:6]))
    elif action == 2:
        cond["fact"] = m.rng.choice(sorted(FACTS))
    elif action == 3:
        cond["fact"] = typo(m.rng, str(cond["fact"]))
    else:
        slot[0][slot[1]] = {"not": dict(cond)}
    m.log.append(f"condition {_where(name, slot)} -> {dict(slot[0][slot[1]])!r}")


def regex(m: Mutant) -> None:
    found = _pick(m, lambda s: s[1] in ("regex", "match", "replace"))
    if found:
        name, slot = found
        pool = REPLACEMENTS if slot[1] == "replace" else REGEXES
        _set(m, name, slot, m.rng.choice(pool), "regex")


def arithmetic(m: Mutant) -> None:
    found = _pick(m, lambda s: s[1] in ("nominalQuota", "shareUnits", "maxLength")
                  or (s[1] == "value" and len(s[2]) > 2 and s[2][-3] == "keys"))
    if found:
        name, slot = found
        _set(m, name, slot, m.rng.choice(EXPRESSIONS), "expression")


def name_format(m: Mutant) -> None:
    """A name format loses, gains or garbles a placeholder."""
    found = _pick(m, lambda s: isinstance(s[0][s[1]], str) and "{" in s[0][s[1]])
    if not found:
        return
    name, slot = found
    text = slot[0][slot[1]]
    holes = re.findall(r"\{[^{}]*\}", text)
    action = m.rng.randrange(4)
    if action == 0 and holes:
        text = text.replace(m.rng.choice(holes), "", 1)
    elif action == 1:
        text += "-{" + m.rng.choice(PLACEHOLDERS) + "}"
    elif action == 2 and holes:
        text = text.replace(m.rng.choice(holes), "{" + m.rng.choice(PLACEHOLDERS) + "}", 1)
    else:
        text = m.rng.choice([text.upper(), text + "{", text.replace("{", "", 1), "x" * 70 + text, text + "/x"])
    _set(m, name, slot, text, "name format")


def setting_in_one_file(m: Mutant) -> None:
    """A setting renamed where it is defined, or only where a condition names it."""
    defaults = m.data("settings.yaml").get("defaults") if m.texts.get("settings.yaml") else None
    if not isinstance(defaults, dict) or not defaults:
        return
    setting = m.rng.choice(sorted(defaults))
    new = typo(m.rng, str(setting))
    if m.rng.random() < 0.5:
        position = list(defaults).index(setting)
        defaults.insert(position, new, defaults.pop(setting))
        m.log.append(f"setting {setting!r} renamed to {new!r} in settings.yaml only")
        return
    found = _pick(m, lambda s: s[1] == "setting" and s[0][s[1]] == setting,
                  [f for f in m.files() if f != "settings.yaml"])
    if found:
        _set(m, found[0], found[1], new, "setting renamed in one condition only:")


def disagree(m: Mutant) -> None:
    """One of two places that must agree changed: a value copied from a sibling of the same file
    (two formats equal, a marker equal to another, a key field set, a tier or manufacturer renamed)."""
    name = m.any_file()
    scalars = [s for s in slots(m.data(name)) if isinstance(s[0][s[1]], str) and s[1] not in ("apiVersion", "kind")]
    if len(scalars) >= 2:
        a, b = m.rng.sample(scalars, 2)
        _set(m, name, a, b[0][b[1]], "copied from " + ".".join(map(str, b[2])) + ":")


def remove_file(m: Mutant) -> None:
    name = m.any_file()
    m.texts[name] = None
    m.parsed.pop(name, None)
    m.log.append(f"removed {name}")


def duplicate_item(m: Mutant) -> None:
    found = _pick(m, lambda s: isinstance(s[0], CommentedSeq))
    if found:
        name, (container, index, _) = found
        container.append(copy.deepcopy(container[index]))
        m.log.append(f"duplicated {_where(name, found[1])}")


MUTATIONS: list[Callable[[Mutant], None]] = [
    type_change, delete_key, rename_key, typo_value, condition, condition, regex, arithmetic, arithmetic,
    name_format, name_format, setting_in_one_file, disagree, remove_file, duplicate_item,
]


KINDS: list[Callable[[Mutant], None]] = list(dict.fromkeys(MUTATIONS))  # each mutation once, in order


def mutate(seed: int, first: Callable[[Mutant], None] | None = None) -> Mutant:
    """One to three seeded mutations; ``first`` (when given) is the first of them, so that a short
    run still applies every kind (the rest are drawn from MUTATIONS, weighted by repetition)."""
    m = Mutant(random.Random(seed))
    for n in range(m.rng.choice((1, 1, 1, 2, 3))):
        (first if n == 0 and first is not None else m.rng.choice(MUTATIONS))(m)
        if n == 0:
            m.first_acted = bool(m.log)
    return m


# --- running ------------------------------------------------------------------------------------------

@pytest.fixture
def fast_rules(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Memoise rule loading per example and parsing per unchanged file; returns the per-example reset."""
    parsed: dict[tuple[str, str], Any] = {}
    real_parse = rulesyaml.load

    def parse(path: Path, display: str) -> Any:
        key = (display, path.read_text(encoding="utf-8"))
        if key not in parsed:
            try:
                parsed[key] = ("ok", real_parse(path, display))
            except Exception as err:  # noqa: BLE001 - replayed exactly as raised
                parsed[key] = ("err", err)
        kind, value = parsed[key]
        if kind == "err":
            raise value
        return value

    loaded: dict[str, Any] = {}
    real_load = rules_pkg.load_rules

    def load(rules_dir: Path | None = None) -> Any:
        key = str(rules_dir)
        if key not in loaded:
            try:
                loaded[key] = ("ok", real_load(rules_dir))
            except Exception as err:  # noqa: BLE001
                loaded[key] = ("err", err)
        kind, value = loaded[key]
        if kind == "err":
            raise value
        return value

    monkeypatch.setattr(rulesyaml, "load", parse)
    monkeypatch.setattr(rules_pkg, "load_rules", load)
    monkeypatch.setattr(pipeline, "load_rules", load)
    return loaded.clear


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), prog_name="gpustack-render")
    gc.enable()  # the CLI switches the collector off for its short run; this process goes on
    return result.exit_code, result.stdout, result.stderr


def write_rules(directory: Path, texts: dict[str, str | None]) -> None:
    for name, text in texts.items():
        path = directory / name
        if text is None:
            path.unlink(missing_ok=True)
        elif not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def crashed(code: int, out: str, err: str) -> bool:
    return code == 3 or "internal error" in err or "Traceback" in out + err


def explain_targets(render_json: str) -> list[str]:
    """A rendered flavor, queue and LocalQueue, and a Node, as explain names them."""
    try:
        items = json.loads(render_json).get("items", [])
    except (ValueError, AttributeError):
        return ["node/node-cpu"]
    targets = []
    for kind in ("ResourceFlavor", "ClusterQueue", "LocalQueue"):
        found = [i["metadata"] for i in items if i.get("kind") == kind]
        if found:
            meta = found[0]
            targets.append(f"{kind}/{meta['namespace']}/{meta['name']}" if kind == "LocalQueue"
                           else f"{kind}/{meta['name']}")
    return targets + ["node/node-cpu"]


def check_example(directory: Path) -> tuple[int, list[str]]:
    """The property for one example: lint's exit code and what went wrong (empty: nothing)."""
    rules = str(directory)
    failures: list[str] = []
    code, out, err = invoke("lint", "--rules", rules)
    if crashed(code, out, err) or code not in (0, 1):
        return code, [f"lint exit {code}: {(out + err)[-600:]}"]
    r_code, r_out, r_err = invoke("render", str(DEMO), "--rules", rules, "--format", "json")
    if crashed(r_code, r_out, r_err):
        return code, [f"render crashed: {r_err[-600:]}"]
    if code == 1:
        problems = sorted(out.splitlines()[:-1])
        if r_code != 2 or sorted(r_err.splitlines()) != problems:
            failures.append(f"lint found problems but render exit {r_code}:\n  lint: {problems}\n  render: {r_err[-600:]}")
        return code, failures
    if r_code not in (0, 1):
        failures.append(f"lint accepted the rules but render exit {r_code}: {r_err[-600:]}")
    runs = [("node-patches", str(DEMO), "--rules", rules, "--format", "json"),
            ("pin", str(WORKLOADS), "--snapshot", str(DEMO), "--rules", rules, "--format", "patch")]
    runs += [("explain", target, str(DEMO), "--rules", rules) for target in explain_targets(r_out)]
    for args in runs:
        c_code, c_out, c_err = invoke(*args)
        if crashed(c_code, c_out, c_err):
            failures.append(f"{args[0]} {args[1]} crashed: {c_err[-600:]}")
        elif args[0] == "node-patches" and c_code not in (0, 1):
            failures.append(f"lint accepted the rules but node-patches exit {c_code}: {c_err[-600:]}")
    return code, failures


def test_mutations_keep_lints_promise(tmp_path: Path, fast_rules: Callable[[], None]) -> None:
    directory = tmp_path / "rules"
    shutil.copytree(RULES, directory)
    verdicts = {0: 0, 1: 0}
    report: list[str] = []
    applied: set[str] = set()  # the kinds that changed something (a kind finds no place to act, at times)
    for i in range(EXAMPLES):
        first = None if thorough() else KINDS[i % len(KINDS)]
        m = mutate(SEED * 1_000_003 + i, first)
        if first is not None and m.first_acted:
            applied.add(first.__name__)
        write_rules(directory, m.finish())
        fast_rules()
        lint_code, failures = check_example(directory)
        verdicts[lint_code] = verdicts.get(lint_code, 0) + 1
        for failure in failures:
            report.append(f"example {i} (seed {SEED}): " + "; ".join(m.log) + "\n  " + failure)
        if len(report) >= 10:
            break
    assert not report, f"{len(report)} failing example(s):\n" + "\n".join(report)
    # the mutations must exercise both verdicts, or the property says nothing
    assert verdicts[0] > 0 and verdicts[1] > 0, verdicts
    if not thorough() and EXAMPLES >= len(KINDS):
        assert applied == {k.__name__ for k in KINDS}, f"mutation kinds that never acted: {set(k.__name__ for k in KINDS) - applied}"


def test_the_unmutated_rules_pass_the_same_checks(tmp_path: Path, fast_rules: Callable[[], None]) -> None:
    """The property's harness itself: the built-in rules lint clean and every command runs."""
    directory = tmp_path / "rules"
    shutil.copytree(RULES, directory)
    assert check_example(directory) == (0, [])
    assert invoke("lint", "--rules", str(directory))[0] == 0
    assert explain_targets(invoke("render", str(DEMO), "--rules", str(directory), "--format", "json")[1])[0] \
        .startswith("ResourceFlavor/")


def test_mutations_are_deterministic() -> None:
    assert mutate(5).finish() == mutate(5).finish()
    assert mutate(5).log == mutate(5).log
    assert any(mutate(s).finish() != BASE for s in range(5))
