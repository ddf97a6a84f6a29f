"""Name normalisation (stage3-node.md §1.3 NormalizeName), parametrised by the rules."""

from __future__ import annotations

from gpustack_render.rules import Rules


class NameNormaliser:
    def __init__(self, rules: Rules) -> None:
        spec = rules.normalisation.normalizeName
        self._cruft = rules.normalisation.cruft_steps
        self._space = spec.spaceBecomes
        self._keep = frozenset(spec.keep)
        self._separators = frozenset(spec.separators)
        self._cache: dict[tuple[str, str, int, bool], str] = {}

    def normalize(self, name: str, prefix: str, max_length: int, strip_cruft: bool) -> str:
        key = (name, prefix, max_length, strip_cruft)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self._normalize(*key)
        return cached

    # --- hooks for ``explain``: the intermediate strings, computed by the same code ----------------
    def cruft_trace(self, name: str) -> list[str]:
        """The string after each cruft step, in rule order."""
        out = []
        for step in self._cruft:
            name = step(name)
            out.append(name)
        return out

    def _normalize(self, name: str, prefix: str, max_length: int, strip_cruft: bool) -> str:
        if strip_cruft:
            for step in self._cruft:
                name = step(name)
        prefix = prefix.lower()
        buf: list[str] = []
        for ch in name:
            if "A" <= ch <= "Z":
                ch = ch.lower()
            elif ch == " ":
                ch = self._space
            if ch not in self._keep:
                continue
            if ch in self._separators and (not buf or buf[-1] in self._separators):
                continue
            buf.append(ch)
            if prefix and len(buf) == len(prefix) and "".join(buf) == prefix:
                buf.clear()
            if max_length and len(buf) >= max_length:
                break
        if buf and buf[-1] in self._separators:
            buf.pop()
        return "".join(buf)
