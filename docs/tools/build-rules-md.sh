#!/usr/bin/env bash
# Rebuild docs/rules.md from docs/tools/rules.md.in: every command the page quotes is run, exactly as
# printed, in a scratch copy of this repository (so the edits never touch your checkout), and its real
# output is pasted in place of the {{name}} markers.
#
#   docs/tools/build-rules-md.sh        # PYTHON=/path/to/python to use another interpreter than .venv's
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-$REPO/.venv/bin/python}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
OUT=$WORK/out
R=$WORK/repo
mkdir -p "$OUT" "$R" "$WORK/bin"

# the scratch copy: tracked and untracked files, its own git history (the diffs below), its own rules
(cd "$REPO" && git ls-files -co --exclude-standard | grep -v '^bench-out/' | tar -cf - -T -) | (cd "$R" && tar -xf -)
cd "$R"
git init -q && git add -A && git -c user.email=docs@example.com -c user.name=docs commit -qm base
printf '#!/bin/sh\nPYTHONPATH=%s exec %s -m gpustack_render "$@"\n' "$R" "$PY" > "$WORK/bin/gpustack-render"
chmod +x "$WORK/bin/gpustack-render"
export PATH="$WORK/bin:$PATH"

step() {  # step NAME COMMAND: record "$ COMMAND", its output (stdout and stderr) and its exit code
  local name=$1 command=$2 code=0
  { echo "\$ $command"; bash -c "$command" 2>&1 || code=$?; echo "[exit $code]"; } > "$OUT/$name.txt"
}
edit() {  # edit FILE OLD NEW: replace the single occurrence of OLD
  "$PY" - "$@" <<'PY'
import sys
from pathlib import Path
path, old, new = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
text = path.read_text()
assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {path}"
path.write_text(text.replace(old, new))
PY
}
nl=$'\n'

# --- the loop: a broken edit
step lint-clean "gpustack-render lint"
edit rules/naming.yaml '  cpu: "gpustack--{gKey}-{os}-{arch}-{count}c' '  cpu: "gpustack--{gkey}-{os}-{arch}-{count}c'
edit rules/presets.yaml '{tier: medium, prefixes: [l40]}' '{tier: meduim, prefixes: [l40]}'
edit rules/presets.yaml '{tier: small, prefixes: [l4]}' '{tier: small, prefixes: [l4, t4]}'
edit rules/manufacturers.yaml '    resourceBase: amd.com/gpu' '    resourcebase: amd.com/gpu'
git diff rules > "$OUT/lint-broken.diff.txt"
step lint-broken "gpustack-render lint"
step lint-broken-render "gpustack-render render fixtures/demo --rules rules > /dev/null"
git checkout -q -- rules

# --- 1. add an accelerator manufacturer
mkdir -p fixtures/cases/kunlunxin-p800
cp docs/examples/kunlunxin-p800/nodes.yaml docs/examples/kunlunxin-p800/case.yaml fixtures/cases/kunlunxin-p800/
cp docs/examples/kunlunxin-p800/case.yaml "$OUT/kx-case.yaml.txt"
S=fixtures/cases/kunlunxin-p800/nodes.yaml
gpustack-render render $S fixtures/demo/namespaces.json > before.yaml
step kx-before "gpustack-render explain node/node-p800 $S | sed -n '/^Accelerator keys/,/^\$/p;/^Flavors/,/^\$/p'"
edit rules/manufacturers.yaml "  - name: iluvatar${nl}    resourceBase: iluvatar.com/gpu${nl}" \
  "  - name: iluvatar${nl}    resourceBase: iluvatar.com/gpu${nl}  - name: kunlunxin${nl}    resourceBase: kunlunxin.com/xpu${nl}"
edit rules/presets.yaml "  thead:${nl}    - {tier: medium, prefixes: [ppu-zw810e, ppu-zwm890]}${nl}" \
  "  thead:${nl}    - {tier: medium, prefixes: [ppu-zw810e, ppu-zwm890]}${nl}  kunlunxin:${nl}    - {tier: large, prefixes: [p800]}${nl}"
git diff rules > "$OUT/kx.diff.txt"
step kx-lint "gpustack-render lint"
step kx-test "gpustack-render test"
step kx-update "gpustack-render test fixtures/cases/kunlunxin-p800 --update"
step kx-test-after "gpustack-render test | tail -n 1"
step kx-diff "gpustack-render diff $S fixtures/demo/namespaces.json --against before.yaml --format markdown | head -n 11"
step kx-explain-it "gpustack-render explain InstanceType/gpustack--kunlunxin-p800-linux-amd64 $S | sed -n '/^Unit-resource/,/^\$/p'"
step kx-explain-node "gpustack-render explain node/node-p800 $S | sed -n '/^Accelerator keys/,/^\$/p;/^Capacity keys/,/^\$/p'"
git checkout -q -- rules && rm -rf fixtures/cases/kunlunxin-p800 before.yaml

# --- 2. change a naming scheme
gpustack-render render fixtures/demo > before.yaml
edit rules/naming.yaml '    accelerated: "gpustack--{aKey}-{os}-{arch}"' '    accelerated: "gpu--{aKey}-{os}-{arch}"'
git diff rules > "$OUT/naming.diff.txt"
step naming-test-summary "gpustack-render test | tail -n 1"
step naming-test-demo "gpustack-render test fixtures/cases/demo-default"
step naming-diff "gpustack-render diff fixtures/demo --against before.yaml --format markdown | head -n 22"
step naming-update "gpustack-render test --update | tail -n 4"
step naming-stderr "gpustack-render test fixtures/cases/overlapping-selectors"
git checkout -q -- rules fixtures

# --- 3. change a unit-resource tier
edit rules/presets.yaml '  small: {cpu: "8", ram: 32Gi}' '  small: {cpu: "8", ram: 48Gi}'
git diff rules > "$OUT/tier.diff.txt"
step tier-test-summary "gpustack-render test | tail -n 1"
step tier-test-demo "gpustack-render test fixtures/cases/demo-default"
step tier-diff "gpustack-render diff fixtures/demo --against before.yaml"
step tier-explain "gpustack-render explain InstanceType/gpustack--nvidia-tesla-t4-linux-amd64 fixtures/demo | grep -A3 'spec.unitResources.ram'"
"$PY" - <<'PY'
import yaml
docs = list(yaml.safe_load_all(open("before.yaml")))
it = next(d for d in docs if d["kind"] == "InstanceType" and d["metadata"]["name"] == "gpustack--nvidia-tesla-t4-linux-amd64")
open("live-t4.yaml", "w").write(yaml.safe_dump(it, sort_keys=False))
PY
step tier-live "gpustack-render explain InstanceType/gpustack--nvidia-tesla-t4-linux-amd64 fixtures/demo live-t4.yaml"
step tier-update "gpustack-render test --update | tail -n 4"

# --- paste
OUT=$OUT "$PY" - "$REPO/docs/tools/rules.md.in" "$REPO/docs/rules.md" <<'PY'
import os, re, sys
from pathlib import Path
out = Path(os.environ["OUT"])

def paste(match: re.Match) -> str:
    lines = (out / f"{match.group(1)}.txt").read_text().rstrip("\n").splitlines()
    code = re.match(r"^\[exit (\d+)\]$", lines[-1]) if lines else None
    if code:
        lines = lines[:-1]
        while lines and not lines[-1].strip():
            lines.pop()
        if code.group(1) != "0" and lines and lines[0].startswith("$ "):
            lines[0] += f"   # exit {code.group(1)}"
    return "\n".join(lines)

Path(sys.argv[2]).write_text(re.sub(r"\{\{([^}]+)\}\}", paste, Path(sys.argv[1]).read_text()))
print(f"wrote {sys.argv[2]}")
PY
