"""Reading a predicate: from a verb group to the relations it states about its subjects.

Given the subjects and where their verb group starts, this module recognises, in order: a
particle ("set up"), a copula definition ("X is a French physicist"), the words between the
verb and its object ("became the director of"), the object itself (an argument such as a
name, date or number, or a lower-case noun phrase such as "radioactive decay"), the trailing
prepositional phrases that give more edges ("... in 1898", "... with Pierre Curie"), and a
coordinated verb group that shares the subjects ("... and later isolated radium").  Each
step is a function named after what it recognises; :func:`read_predicate` only chains them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .lexicon import (
    CLASSIFIERS,
    CONJUNCTIONS,
    DETERMINERS,
    PARTICLES,
    POSSESSIVE_PRONOUNS,
    PREPOSITIONS,
    REPORTING_VERBS,
    TITLE_NOUNS,
    WH,
    is_nounish,
    is_verb,
)
from .mentions import Item
from .names import canonical
from .phrases import VerbGroup, argument_list, normalise_predicate, noun_phrase, np_word, verb_group
from .state import TextState, add_definition, emit

#: How many coordinated verb groups may follow one another ("X did A, and B, and C ...").
MAX_COORDINATION_DEPTH = 3
#: How many words may stand between a verb group and its object ("became the first director of").
MAX_MIDDLE_WORDS = 7
#: Coordinations that continue a predicate with another verb group for the same subjects.
COORDINATIONS = ((("word", "and"),), (("punct", ","), ("word", "and")))
#: Prepositions whose phrase after the object is read as another edge; "of", "for", "as" and "than"
#: phrases belong to the object instead.
TRAILING_PREPOSITIONS = PREPOSITIONS - {"of", "for", "as", "than"}
#: A clause's introduction: (preposition, argument, whether the argument is an entity), e.g. ("in", 1898, False).
Intro = tuple[str, Item, bool]
_MIDDLE_FUNCTION_WORDS = PREPOSITIONS | DETERMINERS | POSSESSIVE_PRONOUNS
_NOT_CONTENT = DETERMINERS | POSSESSIVE_PRONOUNS


@dataclass(slots=True)
class _Verb:
    """The verb part of a predicate: its words (main verb and particle), its group, and its voice."""

    words: list[str]
    group: VerbGroup
    passive: bool
    end: int             # index after the verb part


@dataclass(slots=True)
class _Relation:
    """A predicate's main relation, and what trailing phrases and an introduction attach to."""

    predicate: str
    objects: list[tuple[str, bool]]
    after: int             # index after the object(s)
    core_words: list[str]  # the predicate's base for "<core> <preposition>" edges ("married" → "married in")


def read_predicate(sentence: str, items: list[Item], k: int, subjects: list[str], state: TextState, *,
                   allow_definition: bool, intro: Intro | None = None,
                   passive_participle: bool = False, depth: int = 0) -> None:
    """Read 'verb-group [middle words] object (trailing phrases)' at ``k`` for ``subjects``.

    :param intro: an introductory phrase of the clause ("In 1898,"), attached to the main relation.
    :param passive_participle: the verb is a participle of a passive ("Marie Curie, born in Warsaw, ...").
    :param depth: how many coordinated verb groups came before this one.
    """
    group = verb_group(items, k)
    if group is None or depth > MAX_COORDINATION_DEPTH:
        return
    verb = _verb_with_particle(items, group, passive_participle)
    if allow_definition:
        _read_copula_definition(sentence, items, k, verb, subjects, state)
    relation = _read_object(items, verb, subjects, state)
    if relation is None:
        return
    emit(state, subjects, relation.predicate, relation.objects)
    if intro is not None:
        emit(state, subjects, normalise_predicate(relation.core_words + [intro[0]]),
             [(canonical(intro[1], state), intro[2])])
    end = _read_trailing_phrases(items, relation.after, subjects, relation.core_words, state)
    more = _coordinated_verb_group(items, end)
    if more is not None:
        read_predicate(sentence, items, more, subjects, state, allow_definition=False, depth=depth + 1)


def _verb_with_particle(items: list[Item], group: VerbGroup, passive_participle: bool) -> _Verb:
    """The verb group and a particle that belongs to it ("set up the laboratory", "gave up physics")."""
    words, j, n = list(group.head), group.end, len(items)
    if j < n and items[j].kind == "word" and items[j].lower in PARTICLES and j + 1 < n and (
            items[j + 1].lower in _NOT_CONTENT or items[j + 1].is_argument or items[j + 1].lower in PREPOSITIONS):
        words.append(items[j].lower)
        j += 1
    return _Verb(words, group, group.passive or passive_participle, j)


def _read_copula_definition(sentence: str, items: list[Item], k: int, verb: _Verb, subjects: list[str],
                            state: TextState) -> None:
    """"<Entity> is/was a/an/the <noun phrase>." defines the entity in the text's own words."""
    j, n = verb.end, len(items)
    if not (verb.group.copula_only and len(subjects) == 1 and j < n and items[j].lower in ("a", "an", "the")
            and any(items[x].lower in ("is", "was", "are", "were") for x in range(k, j))):
        return
    last = n - 1
    while last > j and items[last].kind == "punct":
        last -= 1
    add_definition(state, subjects[0], sentence[items[j].start:items[last].end])


def _read_object(items: list[Item], verb: _Verb, subjects: list[str], state: TextState) -> _Relation | None:
    """The main relation: an argument after the middle words, else a noun phrase right after the verb; None if
    there is none (nothing after the verb gives a predicate and an object)."""
    middle, m = _middle_words(items, verb.end)
    direct_np, np_end = ("", verb.end)
    if not verb.group.copula_only and not verb.passive:
        direct_np, np_end = noun_phrase(items, verb.end)
    if m < len(items) and items[m].is_argument:
        return _argument_object(items, m, middle, verb, (direct_np, np_end), subjects, state)
    if direct_np and _ends_noun_phrase_object(items, np_end):
        return _noun_phrase_objects(items, verb, direct_np, np_end)
    return None


def _middle_words(items: list[Item], j: int) -> tuple[list[Item], int]:
    """Words between the verb group and an argument object: prepositions, articles, nouns ("the director of")."""
    middle: list[Item] = []
    m = j
    while m < len(items) and len(middle) < MAX_MIDDLE_WORDS and _continues_middle(items, m, middle):
        middle.append(items[m])
        m += 1
    return middle, m


def _continues_middle(items: list[Item], m: int, middle: list[Item]) -> bool:
    item = items[m]
    if item.is_argument:
        return False
    if not (item.kind == "word" and item.lower in _MIDDLE_FUNCTION_WORDS or np_word(items, m, bool(middle))):
        return False
    # "to win": an infinitive, not a place
    return not (item.kind == "word" and is_nounish(item.lower) and middle and middle[-1].lower == "to")


def _argument_object(items: list[Item], m: int, middle: list[Item], verb: _Verb, direct: tuple[str, int],
                     subjects: list[str], state: TextState) -> _Relation | None:
    """'discovered polonium', 'was born in Warsaw', 'became the director of X', 'was awarded the Nobel Prize'."""
    middle, content = _without_title_noun(middle, items[m])
    last_middle = content[-1].lower if content else ""
    if not _object_follows(items[m], content, verb.words):
        return None
    objects, after = argument_list(items, m, state)
    words = verb.words + [it.lower if it.kind == "word" else it.text for it in middle]
    predicate = normalise_predicate(words)
    if verb.passive and predicate and not (middle and last_middle in PREPOSITIONS):
        predicate = f"{verb.group.copula} {predicate}"     # "was awarded the Nobel Prize"
    core_words = _core_words(words, last_middle, verb, predicate)
    direct_np, np_end = direct
    if direct_np and np_end < m and items[np_end].lower in PREPOSITIONS:
        # "became professor of applied physics at X" also says "became professor".
        emit(state, subjects, normalise_predicate(verb.words), [(direct_np, True)])
        if len(direct_np.split()) <= 2:
            core_words = verb.words + direct_np.split()
    return _Relation(predicate, objects, after, core_words) if predicate else None


def _without_title_noun(middle: list[Item], obj: Item) -> tuple[list[Item], list[Item]]:
    """The middle words and their content words, without a title before a name ("after the planet Uranus",
    "with the chemist Gustave Bémont": the title is not part of the relation)."""
    content = [it for it in middle if it.lower not in _NOT_CONTENT]
    if (len(content) > 1 and content[-1].lower in CLASSIFIERS | TITLE_NOUNS and obj.kind == "name"
            and content[-2].lower in PREPOSITIONS):
        return middle[:middle.index(content[-1])], content[:-1]
    return middle, content


def _object_follows(obj: Item, content: list[Item], verb_words: list[str]) -> bool:
    """Whether the middle words lead to ``obj``: nothing, a preposition, or a noun before a number."""
    if verb_words and verb_words[-1] in REPORTING_VERBS and content and content[0].lower in PREPOSITIONS:
        return False        # "showed with Halban that ...": the object is a that-clause
    if not content:
        return True
    last = content[-1].lower
    return last in PREPOSITIONS or (obj.kind == "num" and is_nounish(last))


def _core_words(words: list[str], last_middle: str, verb: _Verb, predicate: str) -> list[str]:
    """The predicate without its final preposition and articles ("was born in" → "was born")."""
    core = list(words)
    while core and core[-1] in _NOT_CONTENT:
        core.pop()
    if last_middle in PREPOSITIONS:
        core.pop()
    if verb.passive and predicate.startswith(verb.group.copula + " "):
        core = [verb.group.copula] + core
    return core


def _ends_noun_phrase_object(items: list[Item], np_end: int) -> bool:
    """A noun phrase is an object only if the clause ends or moves on after it."""
    return (np_end >= len(items) or items[np_end].kind == "punct"
            or items[np_end].lower in CONJUNCTIONS | PREPOSITIONS | WH)


def _noun_phrase_objects(items: list[Item], verb: _Verb, direct_np: str, np_end: int) -> _Relation | None:
    """'discovered polonium and radium': one edge per noun phrase."""
    objects, after = _more_noun_phrases(items, [(direct_np, True)], np_end)
    core_words = verb.words + (direct_np.split() if len(direct_np.split()) <= 2 else [])
    predicate = normalise_predicate(verb.words)
    return _Relation(predicate, objects, after, core_words) if predicate else None


def _more_noun_phrases(items: list[Item], objects: list[tuple[str, bool]],
                       after: int) -> tuple[list[tuple[str, bool]], int]:
    """Noun phrases joined to the first by "and", up to the next verb."""
    n = len(items)
    while after + 1 < n and items[after].lower == "and":
        more, more_end = noun_phrase(items, after + 1)
        if not more or (more_end < n and items[more_end].kind == "word" and is_verb(items[more_end].lower)):
            break
        if len(objects) == 1 and " " not in objects[0][0] and " " in more and items[after + 1].kind == "word" \
                and items[after + 1].lower not in DETERMINERS:
            # "the biological and medical effects": two modifiers of one noun, not two objects.
            objects = [(f"{objects[0][0]} and {more}", True)]
        else:
            objects.append((more, True))
        after = more_end
    return objects, after


def _read_trailing_phrases(items: list[Item], t: int, subjects: list[str], core_words: list[str],
                           state: TextState) -> int:
    """Edges from prepositional phrases after the object ("... in 1898", "..., with Pierre Curie"); returns
    where they end."""
    while t < len(items):
        item = items[t]
        if item.kind == "word" and item.lower in TRAILING_PREPOSITIONS:
            args, nxt = argument_list(items, t + 1, state)
            if not args:
                return t
            emit(state, subjects, normalise_predicate(core_words + [item.lower]), args)
            t = nxt
        elif item.kind == "punct" and item.text == "," and t + 1 < len(items) and items[t + 1].lower in PREPOSITIONS:
            t += 1
        else:
            return t
    return t


def _coordinated_verb_group(items: list[Item], t: int) -> int | None:
    """Where a verb group coordinated at ``t`` starts ("... and isolated radium", "..., and later ...")."""
    for lead in COORDINATIONS:
        start = t + len(lead)
        if start < len(items) and all(items[t + x].kind == kind and items[t + x].lower == word
                                      for x, (kind, word) in enumerate(lead)) \
                and verb_group(items, start) is not None:
            return start
    return None
