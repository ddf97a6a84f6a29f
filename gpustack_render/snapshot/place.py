"""Where a warning about a Node's labels comes from: the snapshot file, and the line of the label.

The bulk readers keep no positions, so a warning is placed only when it is given: the file is the
one the Node was read from (``Snapshot.files``); the line is found by composing that file again
with libyaml (:func:`gpustack_render.snapshot.locate_line`, once per file), for files up to
``MAX_LOCATED_BYTES`` (a larger one is named without a line: composing it would cost more than the
render). Standard input has no line either.
"""

from __future__ import annotations

import os
import re
from typing import Mapping

MAX_LOCATED_BYTES = 2 << 20  # composing 2 MiB again takes ~0.15 s here; 8 MiB took 0.6 s
# "Node/NAME: … label KEY …" or "… label; …": a warning about the Node's labels, as the evaluator
# words them (not "fit label(s)" it patches)
_ABOUT_LABELS = re.compile(r"Node/([^:\s]+): (?=.*\blabel(?: [A-Za-z0-9]|;))")
_LABEL_KEY = re.compile(r"\blabel ([A-Za-z0-9][A-Za-z0-9._/-]*)")


class NodeLabelPlaces:
    """``place(message)``: the message with ``file:line: `` in front when it is about the labels of
    a Node read from a file; any other message unchanged."""

    def __init__(self, files: Mapping[tuple[str, str], str]) -> None:
        self.files = files
        self._sizes: dict[str, int] = {}

    def __call__(self, message: str) -> str:
        about = _ABOUT_LABELS.match(message)
        if about is None:
            return message
        file = self.files.get(("Node", about[1]))
        if not file:
            return message
        key = _LABEL_KEY.search(message, about.end())
        line = self._line(file, about[1], key[1] if key else None)
        return f"{file}:{line}: {message}" if line is not None else f"{file}: {message}"

    def _line(self, file: str, node: str, key: str | None) -> int | None:
        """The line of the label ``key`` (of the Node's labels when it has no such label)."""
        size = self._sizes.get(file)
        if size is None:
            try:
                size = os.path.getsize(file)
            except OSError:
                size = MAX_LOCATED_BYTES + 1
            self._sizes[file] = size
        if size > MAX_LOCATED_BYTES:
            return None
        from gpustack_render.snapshot import locate_line
        return locate_line(file, "Node", node, ("metadata", "labels", key) if key else ("metadata", "labels"))
