"""The ``pattern-extractor``: deterministic, rule-based triple extraction for the extractive backend.

This is not a language model and does not pretend to be one (component ``pattern-extractor``,
model id ``extractive``).  It reads plain declarative English sentences and keeps only what
its rules can parse, preferring precision over recall:

- **mentions**: runs of capitalised words, with name connectors (``of``, ``de``, ``von`` …,
  ``Prize in``), e.g. "University of Paris", "Nobel Prize in Physics"; years and dates
  ("1898", "26 July 1895") and numbers become literal objects; after a verb, short
  lower-case noun phrases ("polonium", "radioactive decay") are entities too;
- **sentences and clauses**: sentence splitting that respects initials and abbreviations;
  clauses joined by ``; `` / ``, and`` / ``, where`` are read separately; an introductory
  "In 1898," or "In Paris," is attached to the clause's first relation;
- **relations**: ``subject verb-group [words preposition] object`` (a ReVerb-style phrase:
  "was born in", "discovered", "became director of", "is the capital of"), predicates
  normalised to lower-case phrases without auxiliaries, articles or adverbs ("born in");
  trailing prepositional phrases give more edges ("married Pierre Curie in 1895" also gives
  "married in 1895"); clauses with a modal or a negation are skipped;
- **lists**: "X and Y discovered Z and W" gives four edges; "Marie and Pierre Curie"
  expands to both full names;
- **pronouns**: a clause starting with He/She/It/They takes the previous sentence's subject
  (one subject for he/she/it; any for they);
- **appositions and relative clauses**: "Pierre Curie, a French physicist, ..." gives a
  definition, "Paris, the capital of France," an edge, ", who taught at X," an edge;
  "Rutherford's student Frederick Soddy ..." gives "student of";
- **definitions**: "<Entity> is/was a/an/the <noun phrase>." gives a definition.

Single-word names are resolved to the full personal name in the same text that starts or
ends with them ("Rutherford" → "Ernest Rutherford") when that is unambiguous (or that name
is at least three times as frequent as the others).  He/she/his/her only ever point to a
name that looks like a person's (never "Le Croisic" or "Warsaw").  Verbs that report a
that-clause ("showed", "proposed") need a direct object.  A sentence-initial word that the
text also uses in lower case is a common noun ("Polonium is ..." → "polonium").

Known limits: no gender agreement for pronouns, no coreference beyond the rules above,

The rules are spread over modules by what they recognise: :mod:`.lexicon` (word lists and
word classes), :mod:`.sentences` (text to tokenised sentences), :mod:`.mentions` (tokens to
names, dates, numbers), :mod:`.names` (full names and who may be a person), :mod:`.phrases`
(verb groups, noun phrases, argument lists), :mod:`.subjects`, :mod:`.asides`,
:mod:`.clauses` and :mod:`.predicates` (the readers), and :mod:`.state` (what one text's
reading carries and has found).  This module is the entry point.
"""

from __future__ import annotations

from . import Extraction
from .clauses import read_sentence
from .mentions import capitalised_inside, group_items, lowercase_words
from .names import name_aliases
from .sentences import read_sentences
from .state import TextState

__all__ = ["COMPONENT_NAME", "COMPONENT_VERSION", "MODEL_ID", "extract"]

COMPONENT_NAME = "pattern-extractor"
COMPONENT_VERSION = "1.0.0"
MODEL_ID = "extractive"


def extract(text: str) -> Extraction:
    """Extract relationships and definitions from ``text`` with deterministic rules.

    :param text: chunk text (plain text or Markdown).
    :returns: the relationships and definitions found, in text order, without duplicates.
    """
    if not text or not text.strip():
        return Extraction()
    sentences = read_sentences(text)
    state = TextState(lowercase_words=lowercase_words(sentences), capitalised_inside=capitalised_inside(sentences))
    grouped = [group_items(sent, state.lowercase_words, state.capitalised_inside) for sent in sentences]
    state.aliases = name_aliases(grouped)
    for sent, items in zip(sentences, grouped, strict=True):
        if not sent.heading:
            read_sentence(sent.text, items, state)
    return Extraction(relationships=list(state.relationships.values()),
                      definitions=list(state.definitions.values()))
