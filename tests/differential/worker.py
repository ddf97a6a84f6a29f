"""A worker of differential.py: runs gpustack-render commands in this interpreter (whichever
checkout's package it imports) and answers each with the exit code and a digest of stdout.

Protocol: one JSON list of arguments per line on stdin; one JSON object per line on stdout."""

from __future__ import annotations

import gc
import hashlib
import json
import sys

from click.testing import CliRunner

from gpustack_render.cli import main


def run(args: list[str]) -> dict[str, object]:
    result = CliRunner().invoke(main, args, catch_exceptions=True)
    gc.enable()
    out = result.stdout_bytes
    err = result.stderr_bytes.decode(errors="replace").strip().splitlines()
    return {"code": result.exit_code, "sha": hashlib.sha256(out).hexdigest(), "size": len(out),
            "err": err[0][:300] if err else ""}


def serve() -> None:
    for line in sys.stdin:
        sys.stdout.write(json.dumps(run(json.loads(line))) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve()
