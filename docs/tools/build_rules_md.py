"""Rebuild docs/rules.md from docs/tools/rules.md.in: every command the page quotes is run, exactly
as printed, and its real output is pasted in place of the ``{{name}}`` markers.

    python docs/tools/build_rules_md.py           # rewrite docs/rules.md
    python docs/tools/build_rules_md.py --check   # exit 1 when docs/rules.md is stale (tests/test_docs.py)

The commands run in a scratch directory holding copies of what they read (``rules/``, the snapshots
and cases the page names, ``docs/examples/``), so the page's edits never touch the checkout.
``gpustack-render`` runs in this process through click's test runner (the CLI itself: same output,
same exit codes; the whole page takes a few seconds); what follows a ``|`` is run by bash on that
output, as a shell would. The only part of an output that may differ between two runs is a test
case's wall time, which :func:`normalise` masks when comparing.
"""

from __future__ import annotations

import difflib
import gc
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = REPO / "docs" / "tools" / "rules.md.in"
PAGE = REPO / "docs" / "rules.md"
# What the page's commands read, copied into the scratch directory (paths relative to the repository).
INPUTS = ("rules", "templates", "fixtures/demo", "fixtures/cases/demo-default", "fixtures/cases/overlapping-selectors",
          "docs/examples")
KX_CASE = "fixtures/cases/kunlunxin-p800"
_TIME = re.compile(r"(?<=\s)\d+\.\d\ds(?=\s|$)", re.M)


def normalise(text: str) -> str:
    """The page without the test cases' wall times (the one thing two honest runs disagree on)."""
    return _TIME.sub("#.##s", text)


class Scratch:
    """The scratch directory: the copies, the commands, the edits and the diffs of the page."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.out: dict[str, str] = {}
        for rel in INPUTS:
            shutil.copytree(REPO / rel, root / rel)
        self.base = self._files("rules")

    def _files(self, rel: str) -> dict[str, str]:
        return {str(p.relative_to(self.root)): p.read_text(encoding="utf-8")
                for p in sorted((self.root / rel).rglob("*")) if p.is_file()}

    def run(self, command: str) -> tuple[str, int]:
        """One page command: ``gpustack-render ARGS [> FILE] [| FILTER...]`` in-process, anything else by bash."""
        main, _, filters = command.partition(" | ")
        main, _, redirect = main.partition(" > ")
        argv = shlex.split(main)
        if argv[0] != "gpustack-render":
            proc = subprocess.run(["bash", "-c", command], cwd=self.root, capture_output=True, text=True)
            return proc.stderr + proc.stdout, proc.returncode
        from click.testing import CliRunner

        from gpustack_render.cli import main as cli
        result = CliRunner().invoke(cli, argv[1:], catch_exceptions=False, prog_name="gpustack-render")
        gc.enable()  # the CLI switches the collector off for its short run; this process goes on
        out, err = result.stdout, result.stderr
        if "internal error" in err or "Traceback" in err:
            raise RuntimeError(f"{command}: the tool crashed:\n{err}")
        if redirect:
            if redirect != "/dev/null":
                (self.root / redirect).write_text(out, encoding="utf-8")
            out = ""
        if filters:
            out = subprocess.run(["bash", "-c", filters], input=out, cwd=self.root, capture_output=True,
                                 text=True).stdout
        return err + out, result.exit_code

    def step(self, name: str, command: str) -> None:
        """Record ``$ COMMAND``, its output and (when not 0) its exit code under ``name``."""
        output, code = self.run(command)
        lines = [f"$ {command}" + (f"   # exit {code}" if code else "")] + output.rstrip("\n").splitlines()
        while len(lines) > 1 and not lines[-1].strip():
            lines.pop()
        self.out[name] = "\n".join(lines)

    def edit(self, rel: str, old: str, new: str) -> None:
        path = self.root / rel
        text = path.read_text(encoding="utf-8")
        assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {rel}"
        path.write_text(text.replace(old, new), encoding="utf-8")

    def diff(self, name: str, rel_dir: str = "rules") -> None:
        """``git diff rules`` (or templates): the page's edit against the copy's start."""
        now = self._files(rel_dir)
        base = self.base if rel_dir == "rules" else {rel: (REPO / rel).read_text(encoding="utf-8") for rel in now}
        chunks = []
        for rel in sorted(set(base) | set(now)):
            before, after = base.get(rel, ""), now.get(rel, "")
            if before != after:
                chunks.append(f"diff --git a/{rel} b/{rel}\n" + "".join(difflib.unified_diff(
                    before.splitlines(keepends=True), after.splitlines(keepends=True), f"a/{rel}", f"b/{rel}")))
        self.out[name] = "".join(chunks).rstrip("\n")

    def file(self, name: str, rel: str) -> None:
        self.out[name] = (self.root / rel).read_text(encoding="utf-8").rstrip("\n")

    def restore(self) -> None:
        """Back to the start: the rules and every copied case as they were, the page's extra files gone."""
        for rel in ("rules", "templates", "fixtures"):
            shutil.rmtree(self.root / rel, ignore_errors=True)
        for rel in INPUTS:
            if not (self.root / rel).exists():
                shutil.copytree(REPO / rel, self.root / rel)
        for name in ("before.yaml", "live-t4.yaml"):
            (self.root / name).unlink(missing_ok=True)


def _loop(s: Scratch) -> None:
    s.step("lint-clean", "gpustack-render lint --rules rules")
    s.edit("rules/naming.yaml", '  cpu: "gpustack--{gKey}-{os}-{arch}-{count}c', '  cpu: "gpustack--{gkey}-{os}-{arch}-{count}c')
    s.edit("rules/presets.yaml", "{tier: medium, prefixes: [l40]}", "{tier: meduim, prefixes: [l40]}")
    s.edit("rules/presets.yaml", "{tier: small, prefixes: [l4]}", "{tier: small, prefixes: [l4, t4]}")
    s.edit("rules/manufacturers.yaml", "    resourceBase: amd.com/gpu", "    resourcebase: amd.com/gpu")
    s.diff("lint-broken.diff")
    s.step("lint-broken", "gpustack-render lint --rules rules")
    s.step("lint-broken-render", "gpustack-render render fixtures/demo --rules rules > /dev/null")
    s.restore()


def _manufacturer(s: Scratch) -> None:
    shutil.copytree(s.root / "docs/examples/kunlunxin-p800", s.root / KX_CASE)
    s.file("kx-case.yaml", f"{KX_CASE}/case.yaml")
    snap = f"{KX_CASE}/nodes.yaml {KX_CASE}/namespaces.json"
    s.run(f"gpustack-render render {snap} --rules rules > before.yaml")
    s.step("kx-before", f"gpustack-render explain node/node-p800 {KX_CASE}/nodes.yaml --rules rules "
                        "| sed -n '/^Accelerator keys/,/^$/p;/^Flavors/,/^$/p'")
    s.step("kx-test-before", f"gpustack-render test {KX_CASE} --rules rules")
    nl = "\n"
    s.edit("rules/manufacturers.yaml", f"  - name: iluvatar{nl}    resourceBase: iluvatar.com/gpu{nl}",
           f"  - name: iluvatar{nl}    resourceBase: iluvatar.com/gpu{nl}  - name: kunlunxin{nl}"
           f"    resourceBase: kunlunxin.com/xpu{nl}")
    s.edit("rules/presets.yaml", f"  thead:{nl}    - {{tier: medium, prefixes: [ppu-zw810e, ppu-zwm890]}}{nl}",
           f"  thead:{nl}    - {{tier: medium, prefixes: [ppu-zw810e, ppu-zwm890]}}{nl}  kunlunxin:{nl}"
           f"    - {{tier: large, prefixes: [p800]}}{nl}")
    s.diff("kx.diff")
    s.step("kx-lint", "gpustack-render lint --rules rules")
    s.step("kx-test", f"gpustack-render test fixtures/cases/demo-default {KX_CASE} --rules rules")
    s.step("kx-update", f"gpustack-render test {KX_CASE} --rules rules --update")
    s.step("kx-test-after", f"gpustack-render test fixtures/cases/demo-default {KX_CASE} --rules rules | tail -n 1")
    s.step("kx-diff", f"gpustack-render diff {snap} --rules rules --against before.yaml --format markdown "
                      "| head -n 11")
    s.step("kx-explain-it", f"gpustack-render explain InstanceType/gpustack--kunlunxin-p800-linux-amd64 "
                            f"{KX_CASE}/nodes.yaml --rules rules | sed -n '/^Unit-resource/,/^$/p'")
    s.step("kx-explain-node", f"gpustack-render explain node/node-p800 {KX_CASE}/nodes.yaml --rules rules "
                              "| sed -n '/^Accelerator keys/,/^$/p;/^Capacity keys/,/^$/p'")
    s.restore()


def _naming(s: Scratch) -> None:
    s.run("gpustack-render render fixtures/demo --rules rules > before.yaml")
    s.edit("rules/naming.yaml", '    accelerated: "gpustack--{aKey}-{os}-{arch}"', '    accelerated: "gpu--{aKey}-{os}-{arch}"')
    s.diff("naming.diff")
    s.step("naming-test-demo", "gpustack-render test fixtures/cases/demo-default --rules rules")
    s.step("naming-diff", "gpustack-render diff fixtures/demo --rules rules --against before.yaml --format markdown "
                          "| head -n 19")
    s.step("naming-update", "gpustack-render test fixtures/cases/demo-default fixtures/cases/overlapping-selectors "
                            "--rules rules --update | tail -n 4")
    s.step("naming-stderr", "gpustack-render test fixtures/cases/overlapping-selectors --rules rules")
    s.restore()


def _tier(s: Scratch) -> None:
    s.run("gpustack-render render fixtures/demo --rules rules > before.yaml")
    s.edit("rules/presets.yaml", '  small: {cpu: "8", ram: 32Gi}', '  small: {cpu: "8", ram: 48GB}')
    s.step("tier-typo", "gpustack-render lint --rules rules")
    s.edit("rules/presets.yaml", '  small: {cpu: "8", ram: 48GB}', '  small: {cpu: "8", ram: 48Gi}')
    s.diff("tier.diff")
    t4 = "InstanceType/gpustack--nvidia-tesla-t4-linux-amd64"
    s.step("tier-test-demo", "gpustack-render test fixtures/cases/demo-default --rules rules")
    s.step("tier-diff", "gpustack-render diff fixtures/demo --rules rules --against before.yaml")
    s.step("tier-explain", f"gpustack-render explain {t4} fixtures/demo --rules rules | grep -A3 'spec.unitResources.ram'")
    import yaml
    docs = list(yaml.safe_load_all((s.root / "before.yaml").read_text(encoding="utf-8")))
    live = next(d for d in docs if d["kind"] == "InstanceType" and d["metadata"]["name"] == t4.split("/")[1])
    (s.root / "live-t4.yaml").write_text(yaml.safe_dump(live, sort_keys=False), encoding="utf-8")
    s.step("tier-live", f"gpustack-render explain {t4} fixtures/demo live-t4.yaml --rules rules")
    s.step("tier-update", "gpustack-render test fixtures/cases/demo-default --rules rules --update | tail -n 4")
    s.restore()


def _output(s: Scratch) -> None:
    nl = "\n"
    s.edit("rules/output.yaml", "\nkinds: {}\n",
           f"\nkinds:{nl}  InstanceType:{nl}    annotations: {{argocd.argoproj.io/sync-options: Prune=false}}{nl}")
    s.diff("output.diff")
    s.step("output-lint", "gpustack-render lint --rules rules")
    s.edit("rules/output.yaml", "\nkinds:\n  InstanceType:", "\nkinds:\n  InstanceTypes:")
    s.edit("rules/output.yaml", "\n    annotations: {argocd.argoproj.io/sync-options: Prune=false}\n",
           "\n    annotations: {argocd.argoproj.io/sync-options: Prune=false}\n  LocalQueue:\n"
           "    labels: {team: ML Platform}\n")
    s.step("output-lint-broken", "gpustack-render lint --rules rules")
    s.restore()


def _elsewhere(s: Scratch) -> None:
    shutil.copytree(s.root / "rules", s.root / "gitops/gpustack/rules")
    s.step("schema-relink", "gpustack-render schema -o gitops/schemas --rules gitops/gpustack/rules")
    s.step("schema-relink-head", "head -n 1 gitops/gpustack/rules/naming.yaml")
    shutil.rmtree(s.root / "gitops")


def facts_table() -> str:
    """The facts a condition may name (``expressions.FACTS``: the one declaration), as a Markdown table."""
    from gpustack_render.rules.expressions import FACTS, SCOPES
    rows = [f"- **{scope}**: {where}" for scope, where in SCOPES.items()]
    rows += ["", "| fact | type | known in | meaning |", "|---|---|---|---|"]
    for fact in FACTS.values():
        scopes = ", ".join(s for s in SCOPES if s in fact.scopes)
        rows.append(f"| `{fact.name}` | {fact.describe_type()} | {scopes} | {fact.meaning} |")
    return "\n".join(rows)


def _facts(s: Scratch) -> None:
    s.out["facts-table"] = facts_table()
    s.edit("rules/grouping.yaml", "{fact: cpuCount, operator: Gt, value: 0}", '{fact: cpuCount, operator: Gt, value: "0"}')
    s.edit("rules/lifecycle.yaml", "{fact: currentStopPolicy, operator: Eq, value: HoldAndDrain}",
           "{fact: currentStopPolicy, operator: Gt, value: 3}")
    s.edit("rules/queues.yaml", "- {fact: acceleratable}", "- {fact: inactive}")
    s.diff("facts.diff")
    s.step("facts-lint", "gpustack-render lint --rules rules")
    s.restore()


def _template(s: Scratch) -> None:
    nf = "templates/NodeFeature.yaml"
    s.edit(nf, '    nfd.node.kubernetes.io/node-name: "{{ obj.node }}"\n',
           '    nfd.node.kubernetes.io/node-name: "{{ obj.node }}"\n    team: "gpu-{{ obj.namespace | upper }}"\n'
           '    labelled: "{{ \'yes\' if obj.labels else omit }}"\n')
    s.diff("template.diff", "templates")
    s.step("template-render", "gpustack-render render fixtures/demo --templates templates | sed -n '1,12p'")
    s.edit(nf, 'team: "gpu-{{ obj.namespace | upper }}"', 'team: "gpu-{{ obj.namspace | upper }}"')
    s.step("template-fails", "gpustack-render render fixtures/demo --templates templates > /dev/null")
    s.edit(nf, "spec:\n", "spec:\n  labls: {}\n  extra:\n    $fro: x in obj.labels\n")
    s.step("template-lint", "gpustack-render lint --templates templates")
    s.restore()


SECTIONS = (_loop, _manufacturer, _naming, _tier, _output, _elsewhere, _facts, _template)


def build(template_path: Path = TEMPLATE, sections: tuple[Callable[[Scratch], None], ...] = SECTIONS) -> str:
    """The page, from a fresh run of every command in it (docs/tools/build_inputs_md.py builds its
    page with its own template and sections)."""
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="rules-md-") as tmp:
        scratch = Scratch(Path(tmp))
        os.chdir(tmp)
        try:
            for section in sections:
                section(scratch)
        finally:
            os.chdir(cwd)
    template = template_path.read_text(encoding="utf-8")
    missing = sorted(set(re.findall(r"\{\{([^}]+)\}\}", template)) - set(scratch.out))
    if missing:
        raise KeyError(f"{template_path}: no step for {', '.join(missing)}")
    return re.sub(r"\{\{([^}]+)\}\}", lambda m: scratch.out[m.group(1)], template)


def stale_lines(built: str, page: str, name: str = "docs/rules.md") -> Iterator[str]:
    """A unified diff of the committed page against a fresh build, wall times masked."""
    return difflib.unified_diff(normalise(page).splitlines(), normalise(built).splitlines(),
                                f"{name} (committed)", f"{name} (built now)", lineterm="")


def main(argv: list[str], page: Path = PAGE, build_page: Callable[[], str] = build) -> int:
    """Write ``page`` from a fresh build, or (``--check``) exit 1 when the committed one is stale."""
    sys.path.insert(0, str(REPO))
    built = build_page()
    rel = page.relative_to(REPO)
    if "--check" in argv:
        diff = list(stale_lines(built, page.read_text(encoding="utf-8") if page.exists() else "", str(rel)))
        if diff:
            print("\n".join(diff[:80]))
            print(f"{rel} is stale: run `python docs/tools/build_{page.stem}_md.py`", file=sys.stderr)
            return 1
        print(f"{rel} is up to date")
        return 0
    page.write_text(built, encoding="utf-8")
    print(f"wrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
