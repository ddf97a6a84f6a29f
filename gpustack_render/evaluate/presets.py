"""Unit-resource presets of derived InstanceTypes (stage4-chain.md §4.3), table-driven by the rules."""

from __future__ import annotations

import re
from typing import Any

from gpustack_render.evaluate.names import NameNormaliser
from gpustack_render.rules import Rules


class PresetMatcher:
    def __init__(self, rules: Rules, names: NameNormaliser) -> None:
        self.rules, self.names = rules, names
        self._split = re.compile("[" + re.escape(rules.presets.tokenSeparators) + "]")
        self._ignore = set(rules.presets.ignoreLeadingTokens)

    def tier(self, manufacturer: str, product: str, steps: list[dict[str, Any]] | None = None) -> str | None:
        """The tier name, or ``None`` for the fallback. ``steps`` (only when recording, for
        ``explain``) receives what each step read and found."""
        entries = self.rules.presets.entries.get(manufacturer)
        if not entries or not product:
            if steps is not None:
                steps.append({"step": "table", "manufacturer": manufacturer, "product": product,
                              "hasTable": bool(entries)})
            return None
        normalised = self.names.normalize(product, manufacturer, 0, False)
        tokens = [t for t in self._split.split(normalised) if t]
        if steps is not None:
            steps.append({"step": "tokens", "product": product, "normalised": normalised, "tokens": list(tokens)})
        dropped = []
        while tokens and tokens[0] in self._ignore:
            dropped.append(tokens.pop(0))
        if steps is not None and dropped:
            steps.append({"step": "ignored", "dropped": dropped, "tokens": list(tokens)})
        for index, entry in enumerate(entries):
            if tuple(tokens[:len(entry.tokens)]) == entry.tokens:
                for by_token, tier in entry.by:
                    if by_token in tokens:
                        if steps is not None:
                            steps.append({"step": "match", "index": index, "by": by_token, "tier": tier})
                        return tier
                if steps is not None:
                    steps.append({"step": "match", "index": index, "by": None, "tier": entry.tier})
                return entry.tier
        if steps is not None:
            steps.append({"step": "none"})
        return None

    def unit_resources(self, accelerated: bool, manufacturer: str, product: str,
                       steps: list[dict[str, Any]] | None = None) -> tuple[str, str]:
        presets = self.rules.presets
        if not accelerated:
            return presets.cpuPool.cpu, presets.cpuPool.ram
        tier = self.tier(manufacturer, product, steps)
        chosen = presets.tiers[tier] if tier else presets.fallback
        return chosen.cpu, chosen.ram
