#!/usr/bin/env python3
"""The floor of one benchmark row: read and parse the snapshot, then write the command's output,
with the fastest libraries gpustack-render itself uses (stdlib json or the tool's YAML reader for
the snapshot, orjson for the output) and nothing else. Prints the seconds those steps took.

    floor.py SNAPSHOT REFERENCE_OUTPUT

REFERENCE_OUTPUT is the command's real output (JSON or YAML); it is parsed before the clock starts.
"""
from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path

import orjson
import yaml


def main(argv: list[str]) -> int:
    gc.disable()
    snapshot, reference = Path(argv[1]), Path(argv[2])
    text = reference.read_text(encoding="utf-8")
    output = json.loads(text) if text.lstrip().startswith(("{", "[")) else list(yaml.load_all(text, Loader=yaml.CSafeLoader))
    from gpustack_render.yamlio import parse_documents  # the tool's reader: JSON by json, YAML by its fast path
    t0 = time.perf_counter()
    parse_documents(snapshot.read_text(encoding="utf-8"), str(snapshot))
    with open("/dev/null", "wb") as sink:
        sink.write(orjson.dumps(output, option=orjson.OPT_INDENT_2))
    print(f"{time.perf_counter() - t0:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
