"""The names a server's models answer to: their own, their aliases, Ollama's spellings.

A model is served under its profile name (``small``) and under each of its profile
``aliases`` (``coder``, ``qwen2.5-coder:1.5b``). Ollama names models ``name:tag``: a name
without a tag is listed as ``name:latest`` and answers to either spelling.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

TAG = "latest"


def ollama_name(name: str) -> str:
    """The name Ollama's clients see: ``small`` -> ``small:latest``; a name with a tag
    (``qwen:1.5b``) as it is."""
    return name if ":" in name else f"{name}:{TAG}"


@dataclass(frozen=True)
class ModelNames:
    """Every name of the served models.

    Attributes:
        models: the models' own names, sorted.
        aliases: alias -> the model it names.
    """

    models: tuple[str, ...]
    aliases: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, models: Collection[str], aliases: Mapping[str, Sequence[str]]) -> ModelNames:
        """The names of ``models``, each with its ``aliases`` (by model; others ignored)."""
        return cls(
            models=tuple(sorted(models)),
            aliases={a: m for m, names in aliases.items() if m in models for a in names},
        )

    def resolve(self, requested: str) -> str | None:
        """The model ``requested`` names: its name or an alias, with or without Ollama's
        ``:latest`` tag; None when it names none."""
        for name in (requested, requested.removesuffix(f":{TAG}")):
            if name in self.models:
                return name
            if name in self.aliases:
                return self.aliases[name]
        return None

    def aliases_of(self, model: str) -> list[str]:
        """``model``'s aliases, sorted."""
        return sorted(a for a, m in self.aliases.items() if m == model)

    def listed(self) -> list[tuple[str, str]]:
        """``(name, model)`` for every name a list shows: each model, then its aliases."""
        return [(n, m) for m in self.models for n in (m, *self.aliases_of(m))]

    def known(self) -> str:
        """The names, for an error message (``a, b (alias of a)``)."""
        return ", ".join(n if n == m else f"{n} (alias of {m})" for n, m in self.listed())
