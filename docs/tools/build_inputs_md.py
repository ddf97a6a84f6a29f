"""Rebuild docs/inputs.md from docs/tools/inputs.md.in, as docs/rules.md is built (build_rules_md.py):
every command the page quotes is run, exactly as printed, on the snapshot the page shows
(docs/inputs/minimal/), and its real output replaces the ``{{name}}`` markers.

    python docs/tools/build_inputs_md.py           # rewrite docs/inputs.md
    python docs/tools/build_inputs_md.py --check   # exit 1 when docs/inputs.md is stale (tests/test_inputs_doc.py)
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_rules_md import REPO, Scratch, build, main, stale_lines  # noqa: E402,F401  (the one page builder)

TEMPLATE = REPO / "docs" / "tools" / "inputs.md.in"
PAGE = REPO / "docs" / "inputs.md"
MINIMAL = "docs/inputs/minimal"


def _minimal(s: Scratch) -> None:
    shutil.copytree(REPO / MINIMAL, s.root / MINIMAL)
    for part in ("nodes", "devices", "namespaces"):
        s.file(f"minimal-{part}", f"{MINIMAL}/{part}.yaml")
    s.step("render", f"gpustack-render render {MINIMAL} -o rendered")
    s.step("render-ls", "ls rendered")
    s.step("summary", f"gpustack-render summary {MINIMAL}")
    s.step("patches", f"gpustack-render node-patches {MINIMAL} --format kubectl")


def _missing(s: Scratch) -> None:
    s.step("no-namespaces", f"gpustack-render render {MINIMAL}/nodes.yaml {MINIMAL}/devices.yaml > /dev/null")
    s.step("no-devices", f"gpustack-render node-patches {MINIMAL}/nodes.yaml {MINIMAL}/namespaces.yaml")
    s.step("no-devices-summary", f"gpustack-render summary {MINIMAL}/nodes.yaml {MINIMAL}/namespaces.yaml")
    s.step("no-nodes", f"gpustack-render render {MINIMAL}/namespaces.yaml")
    s.step("typo-sed", f"sed 's/nvidia-l4.count: \"1\"/nvidia-l4.count: one/' {MINIMAL}/nodes.yaml > nodes-typo.yaml")
    s.step("typo-summary", f"gpustack-render summary nodes-typo.yaml {MINIMAL}/devices.yaml {MINIMAL}/namespaces.yaml")


SECTIONS = (_minimal, _missing)


def build_page() -> str:
    return build(TEMPLATE, SECTIONS)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], PAGE, build_page))
