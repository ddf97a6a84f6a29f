"""Stage 3 and ``node-patches`` computed per distinct value give exactly what per-Node work gives.

The evaluator shares one ``NodeShape`` between the Nodes whose signature (the values of the labels,
annotations and CPU capacity the compiled rules read) is equal, and the flavor builder replays a
shape's flavor membership; ``explain`` (a recorder) bypasses both. So the recorded evaluation is the
reference: every test here compares the cached run with it, on generated snapshots of many machine
types, the fixtures, other settings and rules whose label keys were renamed (the signature must
follow the rules, not a key list in the code). The fit-label pass is compared with the spec's
member-by-member reading (stage3-node.md §5) on drawn Devices. The partial evaluations (``catalog``:
Nodes, flavors, pools; ``node-patches``: Nodes) must give what the full one gives of those parts.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import msgspec
import pytest
from bench_generator import load_generator
from budget import Branches, budget
from hypothesis import given
from hypothesis import strategies as st

from gpustack_render import pipeline
from gpustack_render.errors import Diagnostics, UserError
from gpustack_render.evaluate.build import Evaluation, evaluate, evaluate_catalog
from gpustack_render.evaluate.capacity import CapacityEvaluator
from gpustack_render.evaluate.record import Records
from gpustack_render.rules import Rules, load_rules
from gpustack_render.rules.resources import default_rules_dir
from gpustack_render.snapshot import inputs

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """400 Nodes of the benchmark's machine mix (several Nodes per shape, many shapes)."""
    path = tmp_path_factory.mktemp("generated") / "snapshot.json"
    path.write_text(json.dumps(load_generator().generate(400, 5, seed=3)))
    return path


def _run(paths: list[str], sets: tuple[str, ...] = (), rules_dir: Path | None = None,
         recorded: bool = False) -> tuple[Evaluation, list[str]]:
    ctx = pipeline.prepare(paths, list(sets), rules_dir)
    diag = Diagnostics()
    return evaluate(ctx.snapshot, ctx.rules, ctx.settings, diag, Records() if recorded else None), diag.warnings


FACT_FIELDS = ("name", "gkey", "gmanu", "cpu_count", "akeys", "has_accelerator", "os", "arch", "profile", "managed",
               "feature_labels", "converged", "facts")


def _facts_view(evaluation: Evaluation) -> list[dict[str, Any]]:
    """Every NodeFacts field but the cache handle, with the shared read-only parts as plain data;
    each converged label also read one at a time (``label``, which never builds the view)."""
    views = []
    for facts in evaluation.node_facts:
        view = {name: (dict(v) if isinstance(v, dict) else list(v) if name == "akeys" else v)
                for name in FACT_FIELDS for v in [getattr(facts, name)]}
        keys = set(facts.converged) | set(facts.feature_labels) | {"example.com/absent"}
        view["label"] = {k: facts.label(k) for k in sorted(keys)}
        assert view["label"] == {k: facts.converged.get(k) for k in sorted(keys)}
        views.append(view)
    return views


def _assert_same_as_recorded(paths: list[str], sets: tuple[str, ...] = (), rules_dir: Path | None = None) -> Evaluation:
    cached, cached_warnings = _run(paths, sets, rules_dir)
    recorded, recorded_warnings = _run(paths, sets, rules_dir, recorded=True)
    assert cached_warnings == recorded_warnings
    assert _facts_view(cached) == _facts_view(recorded)
    assert dataclasses.asdict(cached.plan) == dataclasses.asdict(recorded.plan)
    assert all(f.shape is None for f in recorded.node_facts)  # the recorded run really bypassed the caches
    return cached


SETTINGS = [(), ("instance-type-mixed-on-node=false",), ("instance-type-aware-cpu-manufacturer=true",),
            ("node-management-manual=true",)]


@pytest.mark.parametrize("sets", SETTINGS, ids=lambda s: ",".join(s) or "defaults")
def test_generated_snapshot_cached_equals_recorded(generated: Path, sets: tuple[str, ...]) -> None:
    cached = _assert_same_as_recorded([str(generated)], sets)
    shapes = {id(f.shape) for f in cached.node_facts}
    assert all(f.shape is not None for f in cached.node_facts)
    # the comparison is only worth something when Nodes really shared shapes and flavors
    assert len(shapes) < len(cached.node_facts) / 2
    assert max(len(f.nodes) for f in cached.plan.flavors) > 1


@pytest.mark.parametrize("paths", [
    ["fixtures/demo"],
    ["fixtures/snapshots/overlapping-selectors"],
    ["fixtures/snapshots/lifecycle-refused-too-many-flavors"],
    ["fixtures/snapshots/drain/nodes.yaml", "fixtures/demo/namespaces.json"],
], ids=lambda p: p[0].split("/")[-1])
def test_fixture_snapshots_cached_equals_recorded(paths: list[str]) -> None:
    _assert_same_as_recorded([str(REPO / p) for p in paths])


# --- the signature follows the rules ------------------------------------------------------------

def _node(name: str, labels: dict[str, str], annotations: dict[str, str] | None = None,
          cpu: str = "8") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels},
                         "annotations": annotations or {}},
            "status": {"capacity": {"cpu": cpu, "memory": "32Gi"}}}


def _write(tmp_path: Path, nodes: list[dict[str, Any]]) -> str:
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))
    return str(path)


def _base_labels(rules: Rules) -> dict[str, str]:
    return {rules.grouping.managed_key: "true", "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            rules.normalisation.gKey.manufacturer.label: "Intel"}


def _rules_copy(tmp_path: Path, file: str, old: str, new: str) -> Path:
    target = tmp_path / "rules"
    shutil.copytree(default_rules_dir(), target)
    text = (target / file).read_text()
    assert old in text, (file, old)
    (target / file).write_text(text.replace(old, new))
    return target


def test_renamed_manufacturer_label_is_part_of_the_signature(tmp_path: Path) -> None:
    """Two Nodes equal but for the label the rules now read as the CPU vendor must not share."""
    default = load_rules()
    old_label = default.normalisation.gKey.manufacturer.label
    rules_dir = _rules_copy(tmp_path, "normalisation.yaml", f"label: {old_label}", "label: example.com/cpu-vendor")
    base = _base_labels(default)
    snapshot = _write(tmp_path, [_node("n1", {**base, "example.com/cpu-vendor": "AMD"}),
                                 _node("n2", {**base, "example.com/cpu-vendor": "Intel"}),
                                 _node("n3", {**base, "example.com/cpu-vendor": "AMD"})])
    cached = _assert_same_as_recorded([snapshot], rules_dir=rules_dir)
    by_name = {f.name: f for f in cached.node_facts}
    assert by_name["n1"].gmanu == "amd" and by_name["n2"].gmanu == "intel"
    assert by_name["n1"].shape is by_name["n3"].shape and by_name["n1"].shape is not by_name["n2"].shape


def test_renamed_akey_prefix_is_part_of_the_signature(tmp_path: Path) -> None:
    default = load_rules()
    old = default.normalisation.aKey.labelPrefix
    rules_dir = _rules_copy(tmp_path, "normalisation.yaml", f"labelPrefix: {old}", "labelPrefix: accel.example.com/")
    base = _base_labels(default)
    card = {"accel.example.com/nvidia-l4": "true", "accel.example.com/nvidia-l4.count": "1"}
    snapshot = _write(tmp_path, [_node("n1", {**base, **card}),
                                 _node("n2", {**base, **card, "accel.example.com/nvidia-l4.count": "2"}),
                                 _node("n3", {**base, **card})])
    cached = _assert_same_as_recorded([snapshot], rules_dir=rules_dir)
    by_name = {f.name: f for f in cached.node_facts}
    assert list(by_name["n1"].akeys) == ["nvidia-l4"]
    assert by_name["n1"].shape is by_name["n3"].shape and by_name["n1"].shape is not by_name["n2"].shape
    counts = sorted((f.count, f.nodes) for f in cached.plan.flavors if f.accelerated)
    assert counts == [(1, ["n1", "n3"]), (2, ["n2"])]


def test_labels_nothing_reads_are_shared_and_read_ones_are_not(tmp_path: Path) -> None:
    rules = load_rules()
    base = _base_labels(rules)
    cpu_name = rules.vocabulary.cpuAnnotations.product
    snapshot = _write(tmp_path, [
        _node("a", {**base, "example.com/rack": "r1"}),
        _node("b", {**base, "example.com/rack": "r2"}),                          # unread label only
        _node("c", {**base}, {cpu_name: "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz"}),  # idPrefix annotation
        _node("d", {**base}, cpu="16"),                                           # CPU count
        _node("e", {**base, rules.vocabulary.acceleratableLabel: "true"}),       # a read label
        _node("f", {**base, rules.vocabulary.topologyProfile.label: "fnv64-0123456789abcdef"}),  # its own profile
        _node("g", {**base, rules.vocabulary.topologyProfile.label: "fnv64-fedcba9876543210"}),  # another one
    ])
    cached = _assert_same_as_recorded([snapshot])
    shape = {f.name: f.shape for f in cached.node_facts}
    assert shape["a"] is shape["b"]
    assert len({id(shape[n]) for n in "acdefg"}) == 6
    by_name = {f.name: f for f in cached.node_facts}
    assert by_name["b"].converged["example.com/rack"] == "r2"  # the converged view stays each Node's own
    assert by_name["c"].gkey != by_name["a"].gkey and by_name["d"].cpu_count == 16


def test_shared_shape_warns_and_fails_per_node(tmp_path: Path) -> None:
    """A shape's warnings and problems are reported for every Node that has it, each with its name."""
    rules = load_rules()
    base = {k: v for k, v in _base_labels(rules).items() if k != "kubernetes.io/os"}
    snapshot = _write(tmp_path, [_node("w1", base), _node("w2", base)])
    _, warnings = _run([snapshot])
    assert [w[w.index("Node/"):].split(":")[0] for w in warnings if "feeds no flavor" in w] == ["Node/w1", "Node/w2"]
    bad = {**_base_labels(rules), rules.vocabulary.topologyProfile.label: "not-a-profile"}
    code, out, err = _cli_render(_write(tmp_path, [_node("p1", bad), _node("p2", bad)]))
    assert code == 2 and out == ""
    assert "Node/p1" in err and "Node/p2" in err


def _cli_render(snapshot: str) -> tuple[int, str, str]:
    from cli_invoke import invoke
    result = invoke("render", snapshot)
    return result.exit_code, result.stdout, result.stderr


def test_nodes_of_one_shape_agree_on_every_flavor_selector_key(generated: Path) -> None:
    """What lets the queue stage match Nodes to flavors' nodeLabels once per shape: a shape fixes the
    converged value of every key a flavor selects Nodes by."""
    cached, _ = _run([str(generated)])
    keys = sorted({k for f in cached.plan.flavors for k in f.node_labels})
    seen: dict[int, dict[str, str | None]] = {}
    for facts in cached.node_facts:
        view = {k: facts.converged.get(k) for k in keys}
        assert seen.setdefault(id(facts.shape), view) == view, facts.name


# --- node-patches: owned keys per key tuple, fit labels in one pass -----------------------------

def test_owned_keys_per_key_tuple_match_the_per_key_tests() -> None:
    rules = load_rules()
    evaluator = CapacityEvaluator(rules, Diagnostics())
    sliced = rules.capacity.fit_sliced_label.render({"aKey": "nvidia-l4"})
    shared = rules.capacity.fit_shared_label.render({"aKey": "nvidia-l4"})
    base = next(iter(rules.manufacturers.by_name.values())).resource_base
    keys = [sliced, "example.com/x", shared, "x" + sliced, rules.capacity.fit_sliced_label.render({"aKey": ""}),
            base, base + ".sliced", base + ".partitioned", "cpu"]
    for mapping in ({k: "1" for k in keys}, {k: "1" for k in reversed(keys)}, {}):
        assert evaluator.owned_keys(mapping, False) == tuple(k for k in mapping if evaluator.owns_label(k))
        assert evaluator.owned_keys(mapping, True) == tuple(k for k in mapping if evaluator.owns_capacity(k))
    assert evaluator.owned_keys({k: "1" for k in keys}, False) == (sliced, shared)


def _reference_fit_labels(rules: Rules, devices: inputs.Devices) -> dict[str, str]:
    """stage3-node.md §5 read member by member: the ledger rows joined by id to their spec card; a
    partitioned card is in no population, ``logical`` needs a logically sliced card; a full card
    (all slice slots taken) has 0 free slice units."""
    out: dict[str, str] = {}
    spec = {(g.manufacturer, g.id): g for g in devices.spec.groups}
    for group in devices.status.groups:
        akey = f"{group.manufacturer}-{group.id}"
        if (group.manufacturer, group.id) not in spec:
            continue
        cards = {c.id: c for c in spec[(group.manufacturer, group.id)].accelerators}
        members = [(row, cards[row.id]) for row in group.accelerators if row.id in cards]

        def logical(card: inputs.Accelerator) -> bool:
            return card.status.logicalSliced is not None and card.status.logicalSliced.count > 0

        def whole(card: inputs.Accelerator) -> bool:
            return not (card.status.physicalSliced is not None and card.status.physicalSliced.count > 0)

        def member(card: inputs.Accelerator, population: str) -> bool:
            return whole(card) and (population != "logical" or logical(card))

        def free(row: inputs.LedgerAccelerator, card: inputs.Accelerator) -> int:
            full = logical(card) and row.allocatedSlices >= card.status.logicalSliced.count  # type: ignore[union-attr]
            return 0 if full else row.remaining

        sliced = [free(r, c) for r, c in members if member(c, rules.capacity.fit_populations.slicedMaxFreeUnits)]
        shared = [r for r, c in members if member(c, rules.capacity.fit_populations.sharedFreeCards)]
        if sliced:
            out[rules.capacity.fit_sliced_label.render({"aKey": akey})] = str(max(sliced))
        if shared:
            out[rules.capacity.fit_shared_label.render({"aKey": akey})] = str(
                sum(r.mode in rules.capacity.shared_modes and r.remaining >= rules.capacity.share_units for r in shared))
    return out


CARD_KINDS = Branches()
CARD_STATUS = CARD_KINDS.one_of(
    plain=st.just({}),
    logical=st.builds(lambda n, o: {"logicalSliced": {"count": n, "coresPercentageOvercommit": o}},
                      st.integers(0, 4), st.booleans()),
    partitioned=st.builds(lambda n: {"physicalSliced": {"count": n, "profiles": [{"name": "1g.10gb", "count": n}]}},
                          st.integers(0, 2)),
    both=st.builds(lambda n, p: {"logicalSliced": {"count": n}, "physicalSliced": {"count": p}},
                   st.integers(0, 3), st.integers(0, 2)))
IDS = st.sampled_from(["c0", "c1", "c2", "c3"])
SHARE, FULL = load_rules().capacity.share_units, load_rules().manufacturers.units_per_accelerator  # the boundaries of "free"
ROW = st.builds(lambda i, mode, remaining, slices: {"id": i, "mode": mode, "remaining": remaining,
                                                    "allocatedSlices": slices},
                IDS, st.integers(0, 5), st.sampled_from(sorted({0, 1, SHARE - 1, SHARE, SHARE + 1, FULL})),
                st.integers(0, 4))
GROUP_IDS = st.sampled_from([("nvidia", "l4"), ("nvidia", "a100"), ("amd", "mi300x")])


@st.composite
def devices_objects(draw: Any) -> dict[str, Any]:
    spec, status = [], []
    for manufacturer, group_id in draw(st.lists(GROUP_IDS, max_size=3)):
        cards = [{"id": draw(IDS), "status": draw(CARD_STATUS)} for _ in range(draw(st.integers(0, 4)))]
        spec.append({"manufacturer": manufacturer, "id": group_id, "accelerators": cards})
    for manufacturer, group_id in draw(st.lists(GROUP_IDS, max_size=3)):
        status.append({"manufacturer": manufacturer, "id": group_id,
                       "accelerators": draw(st.lists(ROW, max_size=4))})
    return {"metadata": {"name": "n"}, "spec": {"groups": spec}, "status": {"groups": status}}


RULES_VARIANTS = {population: msgspec.structs.replace(  # the compiled rules are frozen msgspec Structs
    load_rules(), capacity=msgspec.structs.replace(load_rules().capacity, fit_populations=msgspec.structs.replace(
        load_rules().capacity.fit_populations, slicedMaxFreeUnits=population, sharedFreeCards=other)))
    for population, other in (("logical", "wholeCard"), ("wholeCard", "logical"))}


@budget(quick=150, full=3000)
@given(devices=devices_objects(), variant=st.sampled_from(sorted(RULES_VARIANTS)))
def test_fit_labels_one_pass_equals_member_by_member(devices: dict[str, Any], variant: str) -> None:
    rules = RULES_VARIANTS[variant]
    typed = msgspec.convert(devices, inputs.Devices)
    node = msgspec.convert({"metadata": {"name": "n"}}, inputs.Node)
    assert CapacityEvaluator(rules, Diagnostics()).fit_labels(node, typed) == _reference_fit_labels(rules, typed)


def test_fit_label_draws_covered_every_card_kind() -> None:
    test_fit_labels_one_pass_equals_member_by_member()
    CARD_KINDS.assert_all_drawn()


# --- the partial evaluations of catalog and node-patches -----------------------------------------

@pytest.mark.parametrize("case", ["generated", "demo", "overlapping", "too-many-flavors", "aware"])
def test_partial_evaluations_give_what_the_full_one_gives(generated: Path, case: str) -> None:
    """``evaluate_catalog`` (catalog, node-patches) computes a prefix of the stages: the same catalog,
    flavors and Node facts as :func:`evaluate`, and of its warnings exactly the Nodes' (in order)."""
    paths, sets = {"generated": ([str(generated)], ()), "demo": (["fixtures/demo"], ()),
                   "overlapping": (["fixtures/snapshots/overlapping-selectors"], ()),
                   "too-many-flavors": (["fixtures/snapshots/lifecycle-refused-too-many-flavors"], ()),
                   "aware": (["fixtures/demo"], ("instance-type-aware-cpu-manufacturer=true",))}[case]
    ctx = pipeline.prepare([str(REPO / p) for p in paths], list(sets), None)
    full_diag, catalog_diag = Diagnostics(), Diagnostics()
    full = evaluate(ctx.snapshot, ctx.rules, ctx.settings, full_diag)
    catalog = evaluate_catalog(ctx.snapshot, ctx.rules, ctx.settings, catalog_diag)
    assert full.plan.catalog and catalog.plan.catalog == full.plan.catalog
    assert dataclasses.asdict(catalog.plan)["flavors"] == dataclasses.asdict(full.plan)["flavors"]
    assert _facts_view(full) == _facts_view(catalog)
    assert not catalog.plan.cluster_queues and not catalog.plan.node_features
    node_warnings = [w for w in full_diag.warnings if w.startswith("Node/")]
    assert catalog_diag.warnings == node_warnings


def test_partial_evaluations_refuse_bad_nodes_as_the_full_one(tmp_path: Path) -> None:
    rules = load_rules()
    bad = {**_base_labels(rules), rules.vocabulary.topologyProfile.label: "not-a-profile"}
    ctx = pipeline.prepare([_write(tmp_path, [_node("p1", bad)])], [], None)
    messages = []
    for run in (evaluate, evaluate_catalog):
        with pytest.raises(UserError) as raised:
            run(ctx.snapshot, ctx.rules, ctx.settings, Diagnostics())
        messages.append([(p.obj, p.path, p.message) for p in raised.value.problems])
    assert messages[0] == messages[1] and messages[0][0][0] == "Node/p1"


def test_node_patches_warns_about_nodes_as_render_does(tmp_path: Path) -> None:
    """A Node whose accelerator label lacks its count feeds no flavor: node-patches says so exactly
    as render does (its partial evaluation keeps every warning about a Node)."""
    from cli_invoke import invoke
    labels = {**_base_labels(load_rules()), "acceleratable.feature.gpustack.ai/nvidia-a100-sxm4-80gb": "true"}
    snap = tmp_path / "snap.json"
    snap.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [{
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "m2", "labels": labels}}]}))
    render, patches = invoke("render", str(snap)), invoke("node-patches", str(snap))
    assert render.exit_code == patches.exit_code == 0, render.output + patches.output
    node_lines = [line for line in render.stderr.splitlines() if "Node/m2" in line]
    assert any("no flavor for" in line for line in node_lines), render.stderr
    assert [line for line in patches.stderr.splitlines() if "Node/m2" in line] == node_lines
