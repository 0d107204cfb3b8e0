"""Which entity a name mention stands for: full names for lone first or last names, and who may be a person.

A text says "Ernest Rutherford" once and "Rutherford" after that; both must become the same
entity.  Pronouns (he, she, his, her) may only point to a person, which the extractor judges
from a name's form alone ("Le Croisic", "University of Paris" and "Polonium" are not people).
These decisions are used by subjects, objects and pronouns alike, so they live in one place.
"""

from __future__ import annotations

from .lexicon import INSTITUTION_WORDS, PLACE_PREFIXES, is_cap
from .mentions import Item
from .state import TextState


def name_aliases(grouped: list[list[Item]]) -> dict[str, str]:
    """Map a lone first or last name to the full personal name it stands for in this text.

    The full name must be the only one containing the part, or be mentioned at least three
    times as often as every other full name containing it ("Becquerel" → "Henri Becquerel"
    in a text that names his father once).
    """
    counts: dict[str, int] = {}
    for items in grouped:
        for item in items:
            if item.kind != "name" or item.single or not could_be_person(item.text):
                continue
            counts[item.text] = counts.get(item.text, 0) + 1
    candidates: dict[str, dict[str, int]] = {}
    for name, count in counts.items():
        parts = name.split(" ")
        if not 2 <= len(parts) <= 3:
            continue
        for part in (parts[0], parts[-1]):
            candidates.setdefault(part, {})[name] = count
    aliases = {}
    for part, names in candidates.items():
        ranked = sorted(names.items(), key=lambda kv: (-kv[1], kv[0]))
        if len(ranked) == 1 or (ranked[0][1] >= 2 and ranked[0][1] >= 3 * ranked[1][1]):
            aliases[part] = ranked[0][0]
    return aliases


def could_be_person(label: str) -> bool:
    """Whether a name may refer to a person (for he/she/his/her), judged from its form only."""
    parts = label.split(" ")
    if not 2 <= len(parts) <= 4 or not all(is_cap(p) for p in parts):
        return False
    if parts[0].lower() in PLACE_PREFIXES:
        return False
    return not any(p.lower() in INSTITUTION_WORDS or p.lower().endswith("ium") for p in parts)


def canonical(item: Item, state: TextState) -> str:
    """The label of an argument, a lone name replaced by the full name it stands for."""
    if item.kind == "name" and item.single:
        return state.aliases.get(item.text, item.text)
    return item.text


def expand_names(names: list[Item], state: TextState) -> list[str]:
    """'Marie and Pierre Curie' → ['Marie Curie', 'Pierre Curie']; lone names via aliases."""
    labels = [canonical(it, state) for it in names]
    last = names[-1].text.split(" ")
    if len(names) > 1 and len(last) == 2 and all(it.single for it in names[:-1]):
        labels = [f"{it.text} {last[-1]}" for it in names[:-1]] + [names[-1].text]
    return labels
