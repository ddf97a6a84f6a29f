#!/usr/bin/env python3
"""The floor of one benchmark row: read and parse the snapshot, then write the command's output,
with the fastest libraries gpustack-render itself uses and nothing else. A JSON snapshot: the file
mapped (as the tool maps it) and msgspec decoding it in one call into the tool's own typed structs (the fields the tool
reads: the issue's "msgspec typed decode" floor; a file of other kinds too is decoded untyped). A
YAML one: rapidyaml parsing it into its tree, a megabyte of List items at a time as the tool does
(the tool then types it through rapidyaml's JSON, so this is below what the tool can reach). Then
orjson writing the output. Prints the seconds those steps took.

    floor.py SNAPSHOT REFERENCE_OUTPUT

REFERENCE_OUTPUT is the command's real output (JSON or YAML); it is parsed before the clock starts.
"""
from __future__ import annotations

import gc
import json
import mmap
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

    from gpustack_render.snapshot import fastjson, yamlread
    t0 = time.perf_counter()
    if snapshot.suffix == ".json":
        with open(snapshot, "rb") as handle:
            mapped = mmap.mmap(handle.fileno(), 0, prot=mmap.PROT_READ)
        try:
            fastjson._BULK_LIST.decode(mapped)
        except msgspec.ValidationError:  # other kinds too: no typed one-call decode exists for it
            msgspec.json.decode(mapped)
    else:
        data = snapshot.read_bytes()
        chunked = yamlread._list_chunks(data)
        ranges = chunked[1] if chunked is not None else [(0, len(data))]
        tree = ryml.Tree()
        for begin, end in ranges:
            ryml.parse_in_place(bytearray(data[begin:end]), tree=tree)
            tree.clear()
            tree.clear_arena()
    with open("/dev/null", "wb") as sink:
        sink.write(orjson.dumps(output, option=orjson.OPT_INDENT_2))
    print(f"{time.perf_counter() - t0:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
