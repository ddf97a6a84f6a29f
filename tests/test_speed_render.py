"""The render and write stages' fast paths give exactly what the old paths give.

* Slots (gpustack_render/render/slots.py): a kind rendered through its slotted template must give
  the same objects (``repr``: types, key order) or the same error as rendering every real text and
  reading it back, whatever the values (awkward strings, numbers, containers) and wherever a
  template puts them (values, keys, sequence items, flow lists, inside scalars or quotes, comments,
  captured into variables, filtered, macros).
* The sandbox's plain-field fast path still refuses what the sandbox refuses.
* The combined resolver expression matches each resolver; the block emitter still writes the
  dumper's bytes.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustack_render import render as render_module
from gpustack_render import yamlio
from gpustack_render.errors import UserError
from gpustack_render.render import Renderer, slots
from gpustack_render.render.sandbox import BoundedSandbox

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"
KIND = "Topology"  # cluster-scoped: its items have no namespace


@dataclass
class Item:
    name: str
    value: Any = "v"
    key: Any = "k"
    labels: Any = field(default_factory=dict)
    values: list[Any] = field(default_factory=list)
    log: list[int] = field(default_factory=list)
    _secret: str = "hidden"


HEAD = "apiVersion: v1\nkind: Topology\nmetadata:\n  name: {{ obj.name | q }}\n"

# Templates placing values everywhere a template may; each is rendered both ways.
BODIES = {
    "values": HEAD + "  labels: {{ obj.labels | q }}\nspec:\n  value: {{ obj.value | q }}\n"
                     "  items:\n    - {{ obj.value | q }}\n    - key: {{ obj.value | q }}\n"
                     "  flow: [{{ obj.value | q }}, {{ obj.name | q }}]\n  all: {{ obj.values | q }}\n",
    "keys": HEAD + "spec:\n  {{ obj.key | q }}: {{ obj.value | q }}\n  - {{ obj.key | q }}: 1\n",
    "key-in-item": HEAD + "spec:\n  items:\n    - {{ obj.key | q }}: {{ obj.value | q }}\n      other: 1\n",
    "seq-item": HEAD + "spec:\n  items:\n  - {{ obj.value | q }}\n  - {{ obj.labels | q }}\n",
    "loops": HEAD + "spec:\n{%- for v in obj.values %}\n  k{{ loop.index }}: {{ v | q }}\n{%- endfor %}\n"
                    "{%- if obj.labels %}\n  labels: {{ obj.labels | q }}\n{%- else %}\n  none: {{ obj.key | q }}\n"
                    "{%- endif %}\n",
    "in-scalar": HEAD + "spec:\n  plain: gpu-{{ obj.value | q }}\n  single: '{{ obj.value | q }}'\n",
    "in-double": HEAD + "spec:\n  double: \"{{ obj.value | q }}\"\n",
    "comment": HEAD + "# {{ obj.value | q }}\nspec:\n  v: {{ obj.value | q }}  # {{ obj.key | q }}\n",
    "captured": HEAD + "{% set v = obj.value | q %}{% set b %}{{ obj.key | q }}{% endset %}"
                       "spec:\n  v: {{ v }}\n  b: {{ b }}\n  n: {{ (obj.value | q) | length }}\n",
    "compared": HEAD + "spec:\n  same: {{ ((obj.value | q) == (obj.key | q)) | q }}\n  v: {{ obj.value | q }}\n",
    "mapped": HEAD + "spec:\n  all: [{{ obj.values | map('q') | join(', ') }}]\n  v: {{ obj.value | q }}\n",
    "macro": "{% macro m(x) %}{{ x | q }}{% endmacro %}" + HEAD + "spec:\n  v: {{ m(obj.value) }}\n"
             "  w: {{ obj.value | q }}\n",
    "filter-block": HEAD + "spec:\n  v: {% filter upper %}{{ obj.value | q }}{% endfilter %}\n",
    "raw-value": HEAD + "spec:\n  raw: {{ obj.key }}\n  v: {{ obj.value | q }}\n",
    "mutating": HEAD + "spec:\n  n: {{ obj.log.append(1) or obj.log | length }}\n  v: x{{ obj.value | q }}\n",
    "no-name": "apiVersion: v1\nkind: Topology\nmetadata:\n  labels: {{ obj.labels | q }}\nspec: {{ obj.value | q }}\n",
    "scalar-root": "{{ obj.value | q }}\n",
    "data-maps": HEAD + "  labels:\n    a: {{ obj.value | q }}\n    {{ obj.key | q }}: x\n"
                        "  annotations: {{ obj.labels | q }}\nspec:\n  nodeLabels: {{ obj.values | q }}\n"
                        "  labels:\n    z: \"1\"\n    b: {{ obj.name | q }}\n",
    "data-map-parent": HEAD.replace("metadata:\n  name: {{ obj.name | q }}\n", "metadata: {{ obj.labels | q }}\n")
                       + "spec:\n  {{ obj.key | q }}:\n    labels: {{ obj.labels | q }}\n",
    "undefined": HEAD + "spec:\n  v: {{ obj.missing | q }}\n",
    "whole-item": HEAD + "spec:\n  v: {{ obj | q }}\n",
    "q-arguments": HEAD + "spec:\n  v: {{ obj.value | q(1) }}\n",
    "failing": HEAD + "spec:\n  v: {{ obj.value | q }}\n  w: {{ obj.value.nothing.deeper }}\n",
}

# Strings readers treat specially: YAML line breaks (NEL, LS, PS), BOM, tabs, controls, lone
# surrogates, backslash escapes the fast reader refuses, the token characters themselves, YAML
# indicators, words YAML reads as other types, and a long string.
AWKWARD = ["\x85", "\u2028", "\u2029", "\ufeff", "\t", "\x00", "\x1f", "\x7f", "\ud800", "\udfff", "\\/", "\\ud83d",
           "\ue000", "\ue001", "\ue000" + "0\ue001", "\ue004" + "0'\\\ue001", '"', "'", ": ", " #", "- ", "---",
           "...", "{}", "[]", "&a", "*a", "!t", "%", "@", "`", "|", ">", "~", "null", "yes", "on", "0777", "1e3",
           "1:20", "2001-12-14", ".inf", "<<", "=", "", " ", "é", "日本", "\U0001f600", "x" * 3000]
texts = st.one_of(st.sampled_from(AWKWARD), st.text(max_size=12),
                  st.lists(st.sampled_from(AWKWARD + ["a", "b", "-", ":", " "]), max_size=4).map("".join))
scalars = st.one_of(texts, st.integers(min_value=-10**30, max_value=10**30), st.booleans(), st.none(),
                    st.floats(allow_nan=True), st.sampled_from([0.0, -0.0, 1e16, 1.5, 1e-7, float("inf")]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(texts, inner, max_size=3)), max_leaves=6)
items = st.builds(Item, name=st.one_of(st.sampled_from(["n1", "n2", "y"]), texts), value=values,
                  key=st.one_of(texts, scalars), labels=st.one_of(st.dictionaries(texts, texts, max_size=4), values),
                  values=st.lists(values, max_size=3))


def _templates(tmp: Path, body: str) -> Path:
    shutil.copytree(TEMPLATES, tmp, dirs_exist_ok=True)
    (tmp / f"{KIND}.yaml.j2").write_text(body, encoding="utf-8")
    return tmp


class Pair:
    """A renderer taking slots for every kind and one never taking them, on the same templates."""

    def __init__(self, directory: Path) -> None:
        self.fast, self.old = Renderer(directory), Renderer(directory)
        self.old._slotted = dict.fromkeys(self.old._templates)  # type: ignore[assignment]

    def outcome(self, renderer: Renderer, batch: list[Item]) -> str:
        with mock.patch.object(render_module, "SLOT_MIN_ITEMS", 1):
            try:
                return repr(renderer.render_kind(KIND, batch))
            except UserError as err:
                return f"UserError: {err}"
            except Exception as err:  # what q or the template raises, raised the same both ways
                return f"{type(err).__name__}: {err}"

    def compare(self, make: Any) -> None:
        """``make()`` builds fresh items (templates may change them): one batch for each path."""
        assert self.outcome(self.fast, make()) == self.outcome(self.old, make())


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Pair]:
    return {name: Pair(_templates(tmp_path_factory.mktemp(name), body)) for name, body in BODIES.items()}


def _clone(item: Item) -> Item:
    import copy
    return copy.deepcopy(item)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batch=st.lists(items, min_size=1, max_size=4), which=st.sampled_from(sorted(BODIES)))
def test_slots_render_what_reading_the_texts_renders(pairs: dict[str, Pair], batch: list[Item], which: str) -> None:
    pairs[which].compare(lambda: [_clone(item) for item in batch])


@pytest.mark.parametrize("which", sorted(BODIES))
@pytest.mark.parametrize("value", AWKWARD + [0, -5, 10**25, True, False, None, 1.5, 1e16, float("nan"), -0.0,
                                             {"b": "x", "a": "\x85"}, {"a": 1}, {}, [], ["a: b"], [{"a": "b"}]])
def test_every_awkward_value_everywhere(pairs: dict[str, Pair], which: str, value: Any) -> None:
    def make() -> list[Item]:
        return [Item("n1", value=value, key=value, labels=value if isinstance(value, dict) else {"l": "v"},
                     values=[value, "plain"]), Item("n2")]
    pairs[which].compare(make)


def test_plain_values_take_the_fast_path(tmp_path: Path) -> None:
    """Not vacuous: ordinary values are built from shapes, the texts are never read (a number in a
    flow list or a container as a sequence item would be: their tokens are not read there)."""
    body = HEAD + ("  labels: {{ obj.labels | q }}\nspec:\n  value: {{ obj.value | q }}\n"
                   "  items:\n    - {{ obj.key | q }}\n    - key: {{ obj.value | q }}\n"
                   "  flow: [{{ obj.name | q }}, {{ obj.values | q }}]\n  {{ obj.key | q }}: {{ obj.labels | q }}\n")
    renderer = Renderer(_templates(tmp_path, body))
    batch = [Item(f"n{i}", value=v, key=k, labels={"b": "2", "a": "1"}, values=[v, {"x": [1, None]}])
             for i, (v, k) in enumerate([("s", "k"), (7, 8), (True, None), (None, False), ("on", "off"), ("é", "é"),
                                         ({"k": "v"}, "x"), ([1, "2"], "y")])]
    with mock.patch.object(render_module, "SLOT_MIN_ITEMS", 1), \
            mock.patch.object(render_module, "_parse_rendered", side_effect=AssertionError("texts read")):
        objects = renderer.render_kind(KIND, batch)
    assert [o["spec"]["value"] for o in objects] == ["s", 7, True, None, "on", "é", {"k": "v"}, [1, "2"]]
    assert [list(o["spec"])[-1] for o in objects] == ["k", 8, None, False, "off", "é", "x", "y"]
    assert objects[0]["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert objects[0]["spec"]["flow"] == ["n0", ["s", {"x": [1, None]}]]
    assert objects[1]["spec"]["items"] == [8, {"key": 7}]
    assert objects[0]["spec"] is not objects[1]["spec"]  # every object built afresh
    assert objects[0]["metadata"]["labels"] is not objects[1]["metadata"]["labels"]


def test_the_real_templates_take_the_fast_path_for_every_kind() -> None:
    from gpustack_render import pipeline
    ctx = pipeline.prepare([str(ROOT / "fixtures" / "demo")], [], None)
    fast, old = Renderer(None), Renderer(None)
    old._slotted = dict.fromkeys(old._templates)  # type: ignore[assignment]
    with mock.patch.object(render_module, "SLOT_MIN_ITEMS", 1):
        with mock.patch.object(render_module, "_parse_rendered", side_effect=AssertionError("texts read")):
            objects = fast.render_plan(ctx.evaluation.plan)
            catalog = fast.render_catalog(ctx.evaluation.plan)
        assert repr(objects) == repr(old.render_plan(ctx.evaluation.plan))
        assert repr(catalog) == repr(old.render_catalog(ctx.evaluation.plan))
    assert all(template is not None for template in fast._slotted.values())


def test_a_template_that_changes_its_input_runs_once_per_object(pairs: dict[str, Pair]) -> None:
    """The mutating template puts a token inside a scalar, so the kind is read from its real texts:
    rebuilt from the chunks the template yielded, not by rendering again."""
    batch = [Item("n1", value="a"), Item("n2", value=3)]
    outcome = pairs["mutating"].outcome(pairs["mutating"].fast, batch)
    assert [item.log for item in batch] == [[1], [1]]
    assert "'n': 1" in outcome and "'v': 'x\"a\"'" in outcome


def test_the_size_limit_counts_the_real_text(tmp_path: Path) -> None:
    """A value whose JSON is longer than its token (quotes escaped) is measured as written: the
    template writes ``value`` four times, each ``"`` as ``\\"``."""
    pair = Pair(_templates(tmp_path, BODIES["values"]))
    limit = render_module.MAX_OBJECT_CHARS
    for value in ['"' * (limit // 7), '"' * (limit // 9), "x" * (limit // 4), {"k": "\\" * (limit // 7)}]:
        fast, old = pair.outcome(pair.fast, [Item("n", value=value)]), pair.outcome(pair.old, [Item("n", value=value)])
        assert fast == old
    assert "over the limit" in pair.outcome(pair.fast, [Item("n", value='"' * (limit // 7))])
    assert "over the limit" not in pair.outcome(pair.fast, [Item("n", value='"' * (limit // 9))])


def test_q_writes_what_json_dumps_writes() -> None:
    import json
    for value in ["a", "é\u2028\x00\"\\", {"b": 1, "a": [1, {"z": 1, "y": 2}]}, [{"b": 1, "a": 2}], 1.5,
                  float("nan"), None, True, 10**20, ("t",), {1: "x"}]:
        assert slots._quote(value) == json.dumps(value, ensure_ascii=False, sort_keys=isinstance(value, dict))
    with pytest.raises(TypeError, match="not JSON serializable"):
        slots._quote(object())


# --- the sandbox's field fast path ---------------------------------------------------------------

@dataclass
class WithMethod:
    name: str = "x"
    _hidden: str = "no"
    call: Any = None

    def method(self) -> str:
        return "m"


@pytest.mark.parametrize("expression, expected", [
    ("obj.name", "x"), ("obj.call", "None"), ("obj.method()", "m"), ("obj._hidden", ""),
    ("obj.__class__", ""), ("obj.__dict__", ""), ("obj.nothing", ""),
])
def test_sandbox_field_reads_match_the_sandbox(expression: str, expected: str) -> None:
    env = BoundedSandbox()
    plain = __import__("jinja2.sandbox", fromlist=["SandboxedEnvironment"]).SandboxedEnvironment()
    source = "{{ " + expression + " }}"
    assert env.from_string(source).render(obj=WithMethod()) == plain.from_string(source).render(obj=WithMethod()) \
        == expected


def test_sandbox_still_refuses_unsafe_access_through_fields() -> None:
    from jinja2.exceptions import SecurityError
    env = BoundedSandbox()
    item = WithMethod(call=print)  # a field holding a callable is read the sandbox's way
    with pytest.raises(SecurityError):
        env.from_string("{{ obj.name.__class__.__mro__ }}").render(obj=item)
    with pytest.raises(SecurityError):
        env.from_string("{{ obj.method.__func__.__globals__ }}").render(obj=item)
    assert env.from_string("{{ obj.call is defined }}").render(obj=item) == "True"


# --- the YAML emitter ----------------------------------------------------------------------------

def test_combined_resolver_expression_matches_each_resolver() -> None:
    import random
    one = yamlio._spec_non_string()
    alphabet = "0123456789.-+_:eExXoObB~ntTrRuUfFaAlLsSyYiI<=!&* \n\t"
    rnd = random.Random(7)
    words = ["true", "y", "NULL", "~", "", "<<", "=", "0x1F", "0o17", "017", "1_000", "1e3", ".5e3", "1:20.5",
             "2001-12-14 21:59:43.10 -5", ".NaN", "abc"]
    words += ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 9))) for _ in range(50_000)]
    hits = 0
    for word in words:
        each = any(regexp.match(word) for regexp in yamlio._SPEC_NON_STRING)
        hits += each
        assert (one.match(word) is not None) == each, repr(word)
    assert hits > 1000


@settings(max_examples=200, deadline=None)
@given(doc=st.dictionaries(st.sampled_from(["a", "b", "on", "x y", "-", "k: v"]),
                           st.one_of(texts.filter(lambda t: "\n" not in t and len(t) < 60),
                                     st.dictionaries(texts.filter(lambda t: len(t) < 60), texts.filter(
                                         lambda t: len(t) < 60), max_size=3),
                                     st.lists(st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(
                                         ["1", "y", "é"]), max_size=2), max_size=2)), min_size=1, max_size=4))
def test_the_block_emitter_writes_what_the_dumper_writes(doc: dict[str, Any]) -> None:
    """Awkward strings as keys and values of nested mappings and sequences (the resolver expression
    decides their quoting): byte for byte the dumper's text, or the fallback."""
    try:
        fast = yamlio._fast_document(doc)
    except yamlio.NotSimple:
        return
    except UnicodeEncodeError:  # a lone surrogate: the dumper itself refuses it
        with pytest.raises(UnicodeEncodeError):
            yamlio._slow_dump(doc)
        return
    assert fast == yamlio._slow_dump(doc)


def test_token_characters_are_private_use() -> None:
    """The markers are code points no Unicode property gives meaning (private use), and the fast
    reader accepts them (else no shape would ever be read)."""
    import unicodedata
    assert all(unicodedata.category(chr(c)) == "Co" for c in range(0xE000, 0xE005))
    assert not re.search(yamlio._SIMPLE_TEXT_BAD, "".join(chr(c) for c in range(0xE000, 0xE005)))


def test_node_features_are_tidied_while_built() -> None:
    """The NodeFeature shape fixes where its label maps are: they are sorted as the objects are
    built, and the general tidy pass is not needed (its result is checked by the golden tests)."""
    from gpustack_render import pipeline
    ctx = pipeline.prepare([str(ROOT / "fixtures" / "demo")], [], None)
    features = ctx.evaluation.plan.node_features
    assert features
    with mock.patch.object(render_module, "SLOT_MIN_ITEMS", 1), \
            mock.patch.object(render_module, "_tidy", side_effect=AssertionError("tidied again")):
        objects = Renderer(None).render_kind("NodeFeature", features)
    for obj in objects:
        labels = obj["spec"]["labels"]
        assert list(labels) == sorted(labels) and all(type(v) is str for v in labels.values())


def test_a_kind_of_distinct_shapes_is_read_from_its_texts(tmp_path: Path) -> None:
    """Every object its own shape (a loop as long as its index): compiling each shape would cost
    more than reading the texts, so they are read, with the same result."""
    body = HEAD + "spec:\n{%- for v in obj.values %}\n  k{{ loop.index }}: {{ v | q }}\n{%- endfor %}\n"
    pair = Pair(_templates(tmp_path, body))
    batch = [Item(f"n{i}", values=list(range(i + 1))) for i in range(300)]
    with mock.patch.object(slots, "_compile_shape", wraps=slots._compile_shape) as compiled:
        fast = pair.outcome(pair.fast, batch)
    assert fast == pair.outcome(pair.old, batch)
    assert compiled.call_count == max(slots._NEW_SHAPES, len(batch) // 4)  # then it gave up
