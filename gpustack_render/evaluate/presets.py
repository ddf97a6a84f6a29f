"""Unit-resource presets of derived InstanceTypes (stage4-chain.md §4.3), table-driven by the rules."""

from __future__ import annotations

import re

from gpustack_render.evaluate.names import NameNormaliser
from gpustack_render.rules import Rules


class PresetMatcher:
    def __init__(self, rules: Rules, names: NameNormaliser) -> None:
        self.rules, self.names = rules, names
        self._split = re.compile("[" + re.escape(rules.presets.tokenSeparators) + "]")
        self._ignore = set(rules.presets.ignoreLeadingTokens)

    def tier(self, manufacturer: str, product: str) -> str | None:
        """The tier name, or ``None`` for the fallback."""
        entries = self.rules.preset_entries.get(manufacturer)
        if not entries or not product:
            return None
        normalised = self.names.normalize(product, manufacturer, 0, False)
        tokens = [t for t in self._split.split(normalised) if t]
        while tokens and tokens[0] in self._ignore:
            tokens.pop(0)
        for entry in entries:
            if tuple(tokens[:len(entry.tokens)]) == entry.tokens:
                for by_token, tier in entry.by:
                    if by_token in tokens:
                        return tier
                return entry.tier
        return None

    def unit_resources(self, accelerated: bool, manufacturer: str, product: str) -> tuple[str, str]:
        presets = self.rules.presets
        if not accelerated:
            return presets.cpuPool.cpu, presets.cpuPool.ram
        tier = self.tier(manufacturer, product)
        chosen = presets.tiers[tier] if tier else presets.fallback
        return chosen.cpu, chosen.ram
