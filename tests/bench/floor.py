#!/usr/bin/env python3
"""The floor of one benchmark row: read and parse the snapshot, then write the command's output,
with the fastest libraries gpustack-render itself uses and nothing else: msgspec decoding a JSON
snapshot's bytes, rapidyaml parsing a YAML one into its tree (the tool then types it through
rapidyaml's JSON, so this is below what the tool can reach), orjson writing the output. Prints the
seconds those steps took.

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
    import msgspec
    import ryml  # type: ignore[import-untyped]
    t0 = time.perf_counter()
    data = bytearray(snapshot.read_bytes())
    if snapshot.suffix == ".json":
        msgspec.json.decode(data)
    else:
        ryml.parse_in_place(data, tree=ryml.Tree())
    with open("/dev/null", "wb") as sink:
        sink.write(orjson.dumps(output, option=orjson.OPT_INDENT_2))
    print(f"{time.perf_counter() - t0:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
