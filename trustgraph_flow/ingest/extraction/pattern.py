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
only English, and present-tense verbs outside a built-in list are not recognised.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from . import Definition, Extraction, Relationship

COMPONENT_NAME = "pattern-extractor"
COMPONENT_VERSION = "1.0.0"
MODEL_ID = "extractive"

# ---------------------------------------------------------------------------- word lists
_DETERMINERS = {"the", "a", "an"}
_POSSESSIVE_PRONOUNS = {"his", "her", "its", "their"}
_PRONOUNS = {"he", "she", "it", "they"}
_OBJECT_PRONOUNS = {"him", "her", "it", "them", "this", "that", "these", "those", "himself", "herself", "itself",
                    "themselves", "one", "ones", "both", "each", "either", "neither", "all", "some", "any", "many",
                    "most", "several", "few", "such", "other", "others", "another", "something", "everything",
                    "nothing", "anything", "someone", "everyone", "what", "whatever"}
_COPULA = {"is", "are", "was", "were", "am", "be", "been", "being"}
_HAVE = {"has", "have", "had", "having"}
_AUXILIARIES = _COPULA | _HAVE | {"did", "does", "do"}
_MODALS = {"can", "could", "may", "might", "must", "shall", "should", "will", "would", "cannot", "ought"}
_NEGATIONS = {"not", "never", "no", "nor", "neither", "hardly", "barely", "scarcely"}
_PREPOSITIONS = {"in", "at", "on", "from", "to", "with", "by", "for", "of", "into", "after", "during", "under", "as",
                 "near", "until", "since", "through", "within", "onto", "upon", "among", "against", "without",
                 "before", "over", "between", "across", "about", "towards", "toward", "beside", "beyond", "outside",
                 "inside", "throughout", "behind", "like", "via", "per", "along", "around", "alongside"}
_PARTICLES = {"up", "out", "off", "down", "away", "back", "over"}
_CONJUNCTIONS = {"and", "or", "but", "yet", "so", "nor"}
_SUBORDINATORS = {"when", "after", "before", "although", "though", "because", "since", "while", "whereas", "as",
                  "once", "until", "if", "unless", "whether", "whenever", "wherever"}
_WH = {"who", "whom", "whose", "which", "that", "where", "when", "why", "how", "what"}
_ADVERBS = {"also", "later", "then", "first", "soon", "eventually", "subsequently", "jointly", "together",
            "independently", "finally", "again", "still", "already", "formally", "officially", "once", "often",
            "quickly", "briefly", "famously", "originally", "initially", "immediately", "publicly", "largely",
            "partly", "mainly", "shortly", "just", "only", "even", "thus", "therefore", "soon", "afterwards",
            "afterward", "anyway", "long", "now", "ever", "always", "twice", "thereafter", "ultimately", "nevertheless",
            "successfully", "jointly", "personally", "directly", "widely", "especially", "notably", "indeed",
            "instead", "here", "there", "too", "almost", "nearly", "mostly", "rapidly", "slowly", "carefully",
            "first", "last", "newly", "recently", "today", "yet", "meanwhile", "moreover", "however"}
_NOT_ADVERBS_LY = {"family", "italy", "july", "supply", "apply", "reply", "fly", "ally", "anomaly", "rally",
                   "assembly", "monopoly", "butterfly", "jelly", "belly", "lily", "bully", "holy", "early"}
_FUNCTION_WORDS = (_DETERMINERS | _POSSESSIVE_PRONOUNS | _PRONOUNS | _OBJECT_PRONOUNS | _AUXILIARIES | _MODALS
                   | _NEGATIONS | _PREPOSITIONS | _CONJUNCTIONS | _SUBORDINATORS | _WH | _ADVERBS
                   | {"i", "we", "you", "me", "us", "my", "our", "your", "than", "very", "much", "more", "less",
                      "there", "whose", "own", "same", "not", "whom", "every", "few", "little", "least", "less",
                      "so", "such", "either", "rather", "quite", "else", "per", "whereby", "thereby",
                      "among", "upon", "amongst"})
# Verbs that usually report a that-clause: with them, "showed with X that ..." is not a relation to X.
_REPORTING_VERBS = {"showed", "shown", "shows", "suggested", "proposed", "found", "observed", "said", "believed",
                    "concluded", "reported", "demonstrated", "proved", "realised", "realized", "noticed", "argued",
                    "claimed", "knew", "thought", "explained", "predicted", "announced", "stated", "wrote",
                    "noted", "learned", "recognised", "recognized", "confirmed", "established", "understood"}
_PLURAL_ENDINGS = ("ors", "ers", "ists", "ies", "ians", "ants", "ents", "ions", "ings", "eers", "ches", "ices")
_NUMBER_WORDS = {"two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
                 "dozen", "hundred", "thousand", "million"}
_IRREGULAR_VERBS = {
    "arose", "arisen", "awoke", "became", "become", "becomes", "began", "begun", "begins", "bore", "born", "borne",
    "broke", "broken", "brought", "built", "bought", "came", "caught", "chose", "chosen", "dealt", "did", "done",
    "drew", "drawn", "drove", "driven", "fell", "fallen", "felt", "fled", "flew", "flown", "forbade", "forgot",
    "fought", "found", "founds", "gave", "given", "gives", "got", "gotten", "grew", "grown", "held", "hid",
    "hidden", "kept", "knew", "known", "laid", "led", "leads", "left", "lent", "lost", "made", "makes", "meant",
    "means", "met", "paid", "ran", "rose", "risen", "said", "sat", "saw", "seen", "sent", "sold", "shook",
    "shone", "shown", "shows", "sought", "spoke", "spoken", "spent", "split", "spread", "stood", "stands",
    "struck", "swore", "taught", "teaches", "told", "thought", "threw", "thrown", "took", "taken", "takes",
    "understood", "went", "gone", "won", "wins", "wore", "worn", "wrote", "written", "writes", "withdrew",
    "undertook", "overcame", "oversaw", "foresaw", "beat", "sank", "sunk", "slept", "swept", "wept", "wound",
    "read", "put", "set", "cut", "let", "shut", "hit", "cast", "bid", "lit", "fed", "bred", "dug", "hung",
    "stuck", "stung", "spun", "won", "lay", "lies", "remains", "contains", "emits", "includes", "holds",
    "describes", "denotes", "measures", "decays", "glows", "occurs", "honours", "honors", "bears", "carries",
    "houses", "hosts", "owns", "lists", "uses", "forms", "produces", "consists", "requires", "gives", "marks",
    "lives", "works", "studies", "teaches", "directs", "leads", "belongs", "refers", "represents", "equals",
    "exceeds", "follows", "precedes", "replaces", "bears", "keeps", "runs", "sits", "serves", "forms",
}
_NOT_VERBS_ED = {"hundred", "red", "bed", "shed", "sled", "seed", "need", "feed", "speed", "breed", "creed",
                 "deed", "greed", "weed", "tweed", "steed", "reed", "bleed", "indeed", "sacred", "kindred",
                 "naked", "wicked", "rugged", "ragged", "beloved", "learned", "aged", "cupboard", "med", "wed"}
_TITLE_NOUNS = {"planet", "god", "goddess", "chemist", "physicist", "journalist", "president", "scientist",
                "mathematician", "engineer", "doctor", "physician", "biologist", "astronomer", "architect",
                "writer", "explorer", "king", "queen", "emperor", "ship", "engineer", "inventor", "philosopher"}
_CLASSIFIERS = {"element", "elements", "metal", "gas", "isotope", "isotopes", "mineral", "ore", "unit", "word",
                "term", "name", "substance", "compound", "salt", "salts", "city", "town", "country", "village",
                "river", "island", "journal", "book", "prize", "award"}
# Capitalised words that never start a name (sentence-initial function words and the like).
_NOT_NAME = (_FUNCTION_WORDS | _NUMBER_WORDS | _PRONOUNS
             | {"in", "on", "at", "after", "before", "during", "following", "despite", "unlike", "like", "both",
                "each", "every", "however", "later", "earlier", "today", "yesterday", "meanwhile", "chapter",
                "part", "section", "figure", "table", "note", "see", "also", "mr", "mrs", "ms", "dr", "prof",
                "sir", "madame", "monsieur", "yes", "no", "hence", "thus", "although", "because", "whereas",
                "once", "according", "together", "afterwards", "again", "first", "second", "third", "finally",
                "next", "last", "another", "other", "many", "some", "most", "several", "all", "few", "much",
                "one", "none", "nothing", "everything", "here", "there", "this", "that", "these", "those", "it",
                "its", "his", "her", "their", "our", "my", "your", "we", "i", "you", "they", "he", "she",
                "until", "within", "without", "between", "among", "through", "throughout", "towards", "toward",
                "over", "under", "above", "below", "near", "around", "across", "along", "beyond", "outside",
                "inside", "upon", "into", "onto", "from", "with", "by", "for", "of", "to", "as", "since", "while",
                "when", "where", "why", "how", "what", "which", "who", "whose", "whom", "if", "unless", "whether",
                "indeed", "instead", "still", "even", "only", "just", "soon", "then", "now", "yet", "so", "but",
                "and", "or", "nor", "not", "never", "always", "often", "sometimes", "perhaps", "maybe"})
_MONTHS = {"january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december"}
_NAME_CONNECTORS = {"of", "de", "du", "des", "von", "van", "der", "den", "da", "di", "del", "della", "la", "le",
                    "y", "zu", "ten", "ter", "af", "al", "bin", "ibn", "et", "und"}
_INSTITUTION_WORDS = {"institute", "university", "laboratory", "college", "academy", "society", "school",
                      "museum", "prize", "prizes", "company", "hospital", "foundation", "commission", "institution",
                      "church", "abbey", "street", "road", "square", "river", "mountain", "mount", "lake", "sea",
                      "ocean", "island", "islands", "kingdom", "republic", "empire", "state", "states", "city",
                      "war", "medal", "award", "centre", "center", "hall", "house", "library", "press",
                      "journal", "review", "office", "department", "faculty", "station", "observatory",
                      "association", "council", "committee", "club", "league", "union", "party", "army", "navy",
                      "ministry", "government", "bank", "park", "bridge", "tower", "palace", "castle", "cathedral",
                      "zealand", "york", "exhibition", "conference", "congress", "lecture", "lectures", "rays",
                      "radiation", "law", "effect", "experiment", "model", "theory", "principle", "equation",
                      "constant", "number", "scale", "unit", "point", "temperature", "foil", "counter"}
_ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "mt", "no", "vs", "etc", "e.g", "i.e", "fig",
                  "vol", "ca", "approx", "dept", "univ", "inc", "ltd", "co", "corp", "gen", "col", "capt", "lt",
                  "sgt", "rev", "hon", "pp", "ed", "eds", "op", "cit", "al", "cf", "viz", "mme", "mlle", "messrs"}

# ---------------------------------------------------------------------------- regexes
_TOKEN = re.compile(
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"|(?P<word>[^\W\d_](?:[\w]|[-'\u2019](?=[^\W\d_]))*)"
    r"|(?P<punct>[^\w\s])"
)
_SENTENCE_END = re.compile(r"[.!?][\"'\u201d\u2019)\]]*\s+")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^\s*(?:[-*+\u2022]|\d{1,3}[.)])\s+")
_EMPHASIS = re.compile(r"(\*{1,3}|_{2,3})(?=\S)(.+?)(?<=\S)\1")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_CODE = re.compile(r"`+")
_SPACES = re.compile(r"\s+")
_QUOTES = {'"', "\u201c", "\u201d", "\u2018", "\u2019", "'", "`", "\u00ab", "\u00bb", "*", "_"}
_OPEN_BRACKETS = {"(": ")", "[": "]", "{": "}"}
_MAX_NAME_TOKENS = 8
_MAX_PREDICATE_WORDS = 6
_MAX_NP_WORDS = 4
_MAX_DEFINITION_WORDS = 40


# ---------------------------------------------------------------------------- data
@dataclass(slots=True)
class _Item:
    """A word, punctuation mark or grouped argument (name, date, number) of one sentence."""

    kind: str            # "word", "punct", "name", "date", "num"
    text: str            # surface text (label for arguments)
    lower: str
    start: int           # character span in the sentence
    end: int
    modifier: bool = False   # a name used as an adjective or possessive ("French", "Curie's")
    possessive: bool = False
    single: bool = False     # a one-word name

    @property
    def is_argument(self) -> bool:
        return self.kind in ("name", "date", "num") and not self.modifier


@dataclass(slots=True)
class _State:
    """What carries over between sentences of one text."""

    previous_subjects: list[str] = field(default_factory=list)   # for "it" and "they"
    person: str = ""                                              # for "he", "she", "his", "her"
    capitalised_inside: set[str] = field(default_factory=set)
    aliases: dict[str, str] = field(default_factory=dict)
    lowercase_words: set[str] = field(default_factory=set)
    relationships: dict[tuple[str, str, str], Relationship] = field(default_factory=dict)
    definitions: dict[tuple[str, str], Definition] = field(default_factory=dict)


@dataclass(slots=True)
class _Sentence:
    text: str
    heading: bool
    tokens: list[tuple[str, str, int, int]]   # (kind, text, start, end)


# ---------------------------------------------------------------------------- public entry
def extract(text: str) -> Extraction:
    """Extract relationships and definitions from ``text`` with deterministic rules.

    :param text: chunk text (plain text or Markdown).
    :returns: the relationships and definitions found, in text order, without duplicates.
    """
    if not text or not text.strip():
        return Extraction()
    sentences = [_Sentence(s, heading, _tokenize(s)) for s, heading in _sentences(text)]
    state = _State()
    state.lowercase_words = {tok[1] for sent in sentences for tok in sent.tokens[1:]
                             if tok[0] == "word" and tok[1][:1].islower()}
    state.capitalised_inside = {
        tokens[i][1].lower() for tokens in (sent.tokens for sent in sentences) for i in range(1, len(tokens))
        if tokens[i][0] == "word" and _is_cap(tokens[i][1]) and not _is_cap(tokens[i - 1][1])
        and not (i + 1 < len(tokens) and tokens[i + 1][0] == "word" and _is_cap(tokens[i + 1][1]))}
    grouped = [_group(sent, state) for sent in sentences]
    state.aliases = _aliases(grouped, state.lowercase_words)
    for sent, items in zip(sentences, grouped):
        if sent.heading:
            continue
        _read_sentence(sent.text, items, state)
    return Extraction(relationships=list(state.relationships.values()),
                      definitions=list(state.definitions.values()))


# ---------------------------------------------------------------------------- text → sentences
def _clean_inline(line: str) -> str:
    line = _LINK.sub(r"\1", line)
    line = _EMPHASIS.sub(r"\2", line)
    return _CODE.sub("", line)


def _sentences(text: str) -> list[tuple[str, bool]]:
    """Split text into (sentence, is_heading), joining wrapped lines and honouring Markdown structure."""
    out: list[tuple[str, bool]] = []
    block: list[str] = []

    def flush() -> None:
        if block:
            out.extend((s, False) for s in _split_sentences(" ".join(block)))
            block.clear()

    in_fence = False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("```") or line.startswith("~~~"):
            in_fence = not in_fence
            flush()
            continue
        if in_fence:
            continue
        if not line or line.startswith("|") or set(line) <= set("-=*_ "):
            flush()
            continue
        heading = _HEADING.match(line)
        if heading:
            flush()
            out.append((_clean_inline(heading.group(1)), True))
            continue
        bullet = _BULLET.match(line)
        line = _clean_inline((line[bullet.end():] if bullet else line).lstrip("> ").strip())
        if not line:
            continue
        if bullet:      # a list item is read on its own, never as a title
            flush()
            out.extend((s, False) for s in _split_sentences(line))
            continue
        # A short line without final punctuation, standing alone, is a title (common in PDF text).
        if block and _looks_like_title(block[-1]) and (len(block) == 1 or block[-2][-1:] in ".!?:"):
            title = block.pop()
            flush()
            out.append((title, True))
        block.append(line)
    if block and _looks_like_title(block[-1]) and (len(block) == 1 or block[-2][-1:] in ".!?:"):
        title = block.pop()
        flush()
        out.append((title, True))
    flush()
    return out


def _looks_like_title(line: str) -> bool:
    words = line.split()
    return (len(line) < 70 and line[-1:] not in ".!?:;,)\"'\u201d-" and len(words) <= 7
            and words[-1].lower() not in _FUNCTION_WORDS and _is_cap(words[0]))


def _split_sentences(paragraph: str) -> list[str]:
    paragraph = _SPACES.sub(" ", paragraph).strip()
    sentences = []
    start = 0
    for match in _SENTENCE_END.finditer(paragraph):
        nxt = paragraph[match.end():match.end() + 1]
        if not (nxt.isupper() or nxt.isdigit() or nxt in "\"'\u201c\u2018(["):
            continue
        before = paragraph[start:match.start()].rsplit(" ", 1)[-1].lower().lstrip("(\"'")
        if paragraph[match.start()] == "." and (before in _ABBREVIATIONS or
                                                (len(before) == 1 and before.isalpha())):
            continue
        sentences.append(paragraph[start:match.start() + 1].strip())
        start = match.end()
    tail = paragraph[start:].strip()
    if tail:
        sentences.append(tail)
    return [s for s in sentences if s]


def _tokenize(sentence: str) -> list[tuple[str, str, int, int]]:
    tokens: list[tuple[str, str, int, int]] = []
    for match in _TOKEN.finditer(sentence):
        kind = match.lastgroup or "punct"
        text = match.group()
        start, end = match.span()
        if kind == "word" and len(text) > 2 and text[-2:] in ("'s", "\u2019s"):
            tokens.append(("word", text[:-2], start, end - 2))
            tokens.append(("poss", text[-2:], end - 2, end))
            continue
        tokens.append((kind, text, start, end))
    return tokens


# ---------------------------------------------------------------------------- tokens → items
def _is_cap(text: str) -> bool:
    return text[:1].isupper()


def _name_word(tokens: list, i: int, first: bool) -> bool:
    kind, text, _, _ = tokens[i]
    if kind != "word" or not _is_cap(text):
        return False
    lower = text.lower()
    if lower in _MONTHS:
        return False
    if first and lower in _NOT_NAME:
        return False
    return not (not first and lower in _PRONOUNS | _DETERMINERS)


def _group(sent: _Sentence, state: _State) -> list[_Item]:
    """Group tokens into items: names, dates and numbers become single argument items."""
    tokens = _drop_brackets_and_quotes(sent.tokens)
    items: list[_Item] = []
    i, n = 0, len(tokens)
    text = sent.text
    while i < n:
        kind, word, start, end = tokens[i]
        lower = word.lower()
        if kind == "num":
            item, i = _number_or_date(tokens, i)
            items.append(item)
            continue
        if kind == "word" and lower in _MONTHS and _is_cap(word):
            item, i = _month_date(tokens, i)
            items.append(item)
            continue
        if _name_word(tokens, i, first=True):
            j, last = i + 1, i
            while j < n and j - i < _MAX_NAME_TOKENS:
                if _name_word(tokens, j, first=False) and tokens[j - 1][0] != "poss":
                    last, j = j, j + 1
                elif (tokens[j][1] == "." and len(tokens[j - 1][1]) == 1 and tokens[j - 1][1].isupper()
                      and j + 1 < n and _name_word(tokens, j + 1, first=False)):
                    j += 1          # an initial: "J. J. Thomson"
                elif (tokens[j][0] == "word" and j + 1 < n and _name_word(tokens, j + 1, first=False)
                      and (tokens[j][1] in _NAME_CONNECTORS
                           or (tokens[j][1] == "in" and tokens[last][1].lower() in ("prize", "prizes"))
                           or (tokens[j][1] == "and" and any(t[1] == "of" for t in tokens[i:j])
                               and not (j + 2 < n and _name_word(tokens, j + 2, first=False))))):
                    j += 1
                else:
                    break
            label = text[tokens[i][2]:tokens[last][3]]
            single = last == i
            if single and i == 0 and lower not in state.capitalised_inside:
                if lower in state.lowercase_words:
                    label = lower         # a common noun that merely starts the sentence ("Polonium is ...")
                elif lower.endswith(_PLURAL_ENDINGS):
                    # A plural common noun ("Doctors used radium"), not a name.
                    items.append(_Item("word", word, lower, start, end))
                    i += 1
                    continue
            items.append(_Item("name", _SPACES.sub(" ", label), label.lower(), tokens[i][2], tokens[last][3],
                               single=single))
            i = last + 1
            continue
        if kind == "poss":
            if items:
                items[-1].possessive = True
                items[-1].modifier = True
            i += 1
            continue
        items.append(_Item(kind if kind == "word" else "punct", word, lower, start, end))
        i += 1
    _mark_modifiers(items)
    return items


def _drop_brackets_and_quotes(tokens: list) -> list:
    out = []
    closing: list[str] = []
    for tok in tokens:
        kind, text = tok[0], tok[1]
        if kind == "punct" and text in _OPEN_BRACKETS:
            closing.append(_OPEN_BRACKETS[text])
            continue
        if closing:
            if kind == "punct" and text == closing[-1]:
                closing.pop()
            continue
        if kind == "punct" and text in _QUOTES:
            continue
        out.append(tok)
    return out


def _number_or_date(tokens: list, i: int) -> tuple[_Item, int]:
    kind, text, start, end = tokens[i]
    n = len(tokens)
    # "26 July 1895"
    if (text.isdigit() and 1 <= int(text) <= 31 and i + 2 < n and tokens[i + 1][1].lower() in _MONTHS
            and _is_year(tokens[i + 2][1])):
        last = tokens[i + 2]
        return _Item("date", f"{text} {tokens[i + 1][1]} {last[1]}", "", start, last[3]), i + 3
    if _is_year(text):
        return _Item("date", text, text, start, end), i + 1
    return _Item("num", text, text, start, end), i + 1


def _month_date(tokens: list, i: int) -> tuple[_Item, int]:
    _, month, start, end = tokens[i]
    n = len(tokens)
    j = i + 1
    day = ""
    if j < n and tokens[j][0] == "num" and tokens[j][1].isdigit() and 1 <= int(tokens[j][1]) <= 31:
        day = tokens[j][1]
        j += 1
        if j < n and tokens[j][1] == ",":
            j += 1
    if j < n and tokens[j][0] == "num" and _is_year(tokens[j][1]):
        label = f"{month} {day}, {tokens[j][1]}" if day else f"{month} {tokens[j][1]}"
        return _Item("date", label, label.lower(), start, tokens[j][3]), j + 1
    return _Item("word", month, month.lower(), start, end), i + 1


def _is_year(text: str) -> bool:
    return len(text) == 4 and text.isdigit() and 1000 <= int(text) <= 2099


def _mark_modifiers(items: list[_Item]) -> None:
    """Names used as adjectives ("French physicist") and years before names are not arguments."""
    for k, item in enumerate(items):
        nxt = items[k + 1] if k + 1 < len(items) else None
        if item.kind == "name" and nxt is not None and nxt.kind == "word" and _is_nounish(nxt.lower):
            item.modifier = True
        if (item.kind == "date" and nxt is not None and nxt.kind == "name" and item.text.isdigit()
                and k > 0 and items[k - 1].lower in _DETERMINERS):
            item.modifier = True     # "the 1903 Nobel Prize"


# ---------------------------------------------------------------------------- word classes
def _is_verb(word: str) -> bool:
    if word in _IRREGULAR_VERBS:
        return True
    return len(word) > 3 and word.endswith("ed") and word not in _NOT_VERBS_ED


def _is_adverb(word: str) -> bool:
    return word in _ADVERBS or (len(word) > 4 and word.endswith("ly") and word not in _NOT_ADVERBS_LY)


def _is_nounish(word: str) -> bool:
    """A lower-case word that can be part of a noun phrase."""
    if not word.isalpha() and "-" not in word:
        return False
    if word in _FUNCTION_WORDS or word in _MODALS or _is_verb(word) or _is_adverb(word):
        return False
    if word.endswith("ing") and len(word) > 5:
        return False
    return len(word) > 1


# ---------------------------------------------------------------------------- aliases
def _aliases(grouped: list[list[_Item]], lowercase_words: set[str]) -> dict[str, str]:
    """Map a lone first or last name to the full personal name it stands for in this text.

    The full name must be the only one containing the part, or be mentioned at least three
    times as often as every other full name containing it ("Becquerel" → "Henri Becquerel"
    in a text that names his father once).
    """
    counts: dict[str, int] = {}
    for items in grouped:
        for item in items:
            if item.kind != "name" or item.single or not _could_be_person(item.text):
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


_PLACE_PREFIXES = {"le", "la", "les", "el", "los", "las", "san", "santa", "saint", "st", "fort", "port", "lake",
                   "mount", "new", "north", "south", "east", "west", "upper", "lower", "great", "cape", "the"}


def _could_be_person(label: str) -> bool:
    """Whether a name may refer to a person (for he/she/his/her), judged from its form only."""
    parts = label.split(" ")
    if not 2 <= len(parts) <= 4 or not all(_is_cap(p) for p in parts):
        return False
    if parts[0].lower() in _PLACE_PREFIXES:
        return False
    return not any(p.lower() in _INSTITUTION_WORDS or p.lower().endswith("ium") for p in parts)


# ---------------------------------------------------------------------------- sentences
def _read_sentence(sentence: str, items: list[_Item], state: _State) -> None:
    items = _read_asides(sentence, items, state)
    main_subjects: list[str] | None = None
    for clause, subordinate in _clauses(items):
        subjects = _read_clause(sentence, clause, state, main_subjects)
        if subjects and not subordinate:
            main_subjects = subjects
    if main_subjects:
        state.previous_subjects = main_subjects
        if len(main_subjects) == 1 and _could_be_person(main_subjects[0]):
            state.person = main_subjects[0]


def _canonical(item: _Item, state: _State) -> str:
    if item.kind == "name" and item.single:
        return state.aliases.get(item.text, item.text)
    return item.text


def _add_relationship(state: _State, subject: str, predicate: str, obj: str, entity: bool) -> None:
    if not subject or not predicate or not obj or subject.casefold() == obj.casefold():
        return
    if len(predicate.split()) > _MAX_PREDICATE_WORDS:
        return
    key = (subject, predicate, obj)
    if key not in state.relationships:
        state.relationships[key] = Relationship(subject, predicate, obj, entity)


def _add_definition(state: _State, entity: str, text: str) -> None:
    text = text.strip(" ,;:.")
    words = text.split()
    if len(words) < 2 or len(words) > _MAX_DEFINITION_WORDS:
        return
    key = (entity, text)
    state.definitions.setdefault(key, Definition(entity, text))


def _next_comma(items: list[_Item], start: int, limit: int = 14) -> int:
    for k in range(start, min(len(items), start + limit)):
        if items[k].kind == "punct" and items[k].text in ",;":
            return k if items[k].text == "," else -1
    return len(items) if len(items) - start <= limit else -1


def _read_asides(sentence: str, items: list[_Item], state: _State) -> list[_Item]:
    """Read and remove appositions (", a French physicist,") and relative clauses (", who ...,")."""
    k = 0
    while k + 2 < len(items):
        head, comma, first = items[k], items[k + 1], items[k + 2]
        if not (head.is_argument and head.kind == "name" and comma.text == ","):
            k += 1
            continue
        close = _next_comma(items, k + 2)
        if close < 0:
            k += 1
            continue
        aside = items[k + 2:close]
        label = _canonical(head, state)
        handled = False
        if first.lower in ("a", "an", "the") and len(aside) > 1 and (
                aside[1].kind == "word" or (aside[1].kind == "name" and aside[1].modifier)):
            if not any(it.kind == "word" and (_is_verb(it.lower) or it.lower in _AUXILIARIES | _WH)
                       for it in aside):
                handled = True
                relation = _noun_of_relation(aside, state)
                if relation is not None:
                    _add_relationship(state, label, relation[0], relation[1], True)
                else:
                    _add_definition(state, label, sentence[first.start:aside[-1].end])
        elif first.lower in ("who", "which"):
            handled = True
            _read_predicate(sentence, aside, 1, [label], state, allow_definition=True)
        elif first.kind == "word" and close < len(items) and first.lower not in _AUXILIARIES and (
                _is_verb(first.lower) or (first.lower.endswith("ing") and len(first.lower) > 5)):
            # "Marie Curie, born in Warsaw, moved ..." / "Geiger, working under Rutherford, fired ..."
            handled = True
            if _is_verb(first.lower):
                _read_predicate(sentence, aside, 0, [label], state, allow_definition=False, passive_participle=True)
        if handled:
            del items[k + 1:close + 1 if close < len(items) else close]
        k += 1
    return items


def _noun_of_relation(aside: list[_Item], state: _State) -> tuple[str, str] | None:
    """'the capital of France' → ('capital of', 'France')."""
    words = [it for it in aside if not (it.kind == "word" and it.lower in _DETERMINERS)]
    if len(words) < 3 or not words[-1].is_argument or words[-1].kind != "name":
        return None
    if words[-2].kind != "word" or words[-2].lower not in _PREPOSITIONS:
        return None
    nouns = words[:-2]
    if not nouns or len(nouns) > 3 or not all(it.kind == "word" and _is_nounish(it.lower) for it in nouns):
        return None
    return " ".join(it.lower for it in nouns) + " " + words[-2].lower, _canonical(words[-1], state)


def _clauses(items: list[_Item]) -> list[tuple[list[_Item], bool]]:
    """Split a sentence into (clause, is_subordinate) parts at '; ', ', and <clause>', ', where ...'."""
    parts: list[tuple[list[_Item], bool]] = []
    current: list[_Item] = []
    k = 0
    n = len(items)
    while k < n:
        item = items[k]
        if item.kind == "punct" and item.text == ";":
            parts.append((current, False))
            current = []
            k += 1
            continue
        if (item.kind == "punct" and item.text == "," and k + 1 < n and items[k + 1].kind == "word"
                and items[k + 1].lower in ("and", "but", "while", "whereas", "where", "when", "yet", "so")
                and _has_verb(current) and _starts_clause(items, k + 2)):
            parts.append((current, False))
            current = []
            k += 2
            continue
        if (item.kind == "word" and item.lower == "and" and current and _has_verb(current)
                and k + 1 < n and items[k + 1].kind == "word" and items[k + 1].lower in _PRONOUNS
                and _verb_group(items, k + 2) is not None):
            parts.append((current, False))
            current = []
            k += 1
            continue
        current.append(item)
        k += 1
    if current:
        parts.append((current, False))
    out: list[tuple[list[_Item], bool]] = []
    for clause, _ in parts:
        out.extend(_split_subordinate(clause))
    return out


def _split_subordinate(clause: list[_Item]) -> list[tuple[list[_Item], bool]]:
    """'When X did Y, Z did W' → [(X did Y, subordinate), (Z did W, main)]."""
    if clause and clause[0].kind == "word" and clause[0].lower in _SUBORDINATORS - {"as"}:
        comma = _next_comma(clause, 1, limit=20)
        if 0 < comma < len(clause):
            return [(clause[1:comma], True), (clause[comma + 1:], False)]
    return [(clause, False)]


def _has_verb(items: list[_Item]) -> bool:
    return any(it.kind == "word" and (_is_verb(it.lower) or it.lower in _AUXILIARIES) for it in items)


def _starts_clause(items: list[_Item], k: int) -> bool:
    """Whether a subject and a verb group (or just a verb group) start at ``k``."""
    if k >= len(items):
        return False
    if items[k].kind == "word" and items[k].lower in _PRONOUNS:
        return _verb_group(items, k + 1) is not None
    if items[k].is_argument and items[k].kind == "name":
        j = k + 1
        while j + 1 < len(items) and (items[j].text == "," or items[j].lower == "and") and items[j + 1].is_argument:
            j += 2
        return _verb_group(items, j) is not None
    return _verb_group(items, k) is not None


# ---------------------------------------------------------------------------- clauses
def _read_clause(sentence: str, clause: list[_Item], state: _State,
                 sentence_subjects: list[str] | None) -> list[str] | None:
    """Read one clause; returns its explicit subjects (for pronoun resolution), if any."""
    k, intro = _skip_intro(clause)
    if k >= len(clause):
        return None
    subjects, k, explicit = _subjects(clause, k, state, sentence_subjects)
    if not subjects:
        # A clause that starts with a verb continues the sentence's subject ("..., and later isolated radium").
        if sentence_subjects and _verb_group(clause, k) is not None:
            subjects, explicit = sentence_subjects, False
        else:
            return None
    _read_predicate(sentence, clause, k, subjects, state, allow_definition=True, intro=intro)
    return subjects if explicit else None


def _skip_intro(clause: list[_Item]) -> tuple[int, tuple[str, _Item, bool] | None]:
    """Skip "In 1898," / "Later," / "In the same year," and return the attachable intro, if any."""
    if not clause or clause[0].kind != "word":
        return 0, None
    first = clause[0].lower
    if first in _PREPOSITIONS and first not in ("of", "as", "like"):
        j = 1
        while j < len(clause) and clause[j].kind == "word" and clause[j].lower in _DETERMINERS:
            j += 1
        argument = clause[j] if j < len(clause) and clause[j].is_argument else None
        if argument is not None and j + 1 < len(clause) and clause[j + 1].text == ",":
            return j + 2, (first, argument, argument.kind == "name")
        if argument is not None and argument.kind == "date" and j + 1 < len(clause):
            return j + 1, (first, argument, False)
        comma = _next_comma(clause, 1, limit=10)
        if 0 < comma < len(clause):
            return comma + 1, None
        return 0, None
    if (first in _ADVERBS or _is_adverb(first)) and len(clause) > 1:
        if clause[1].text == ",":
            return 2, None
        if clause[1].kind == "name" or clause[1].lower in _PRONOUNS:
            return 1, None
    return 0, None


def _subjects(clause: list[_Item], k: int, state: _State,
              sentence_subjects: list[str] | None) -> tuple[list[str], int, bool]:
    """Parse the subject at ``k``: a name list, a pronoun, a possessive description or "the element X"."""
    item = clause[k]
    n = len(clause)
    # Pronouns.
    if item.kind == "word" and item.lower in _PRONOUNS:
        if item.lower == "it" and k + 2 < n and clause[k + 1].lower in _COPULA and (
                clause[k + 2].lower in _PREPOSITIONS or clause[k + 2].kind != "word"):
            return [], k, False        # "It was in 1898 that ..." (a cleft, not a reference)
        if item.lower in ("he", "she"):
            person = sentence_subjects[0] if (sentence_subjects and len(sentence_subjects) == 1
                                              and _could_be_person(sentence_subjects[0])) else state.person
            return ([person], k + 1, False) if person else ([], k, False)
        antecedents = sentence_subjects or state.previous_subjects
        if item.lower == "they" and antecedents and (len(antecedents) > 1 or antecedents[0].endswith("s")):
            return list(antecedents), k + 1, False
        if item.lower == "it" and len(antecedents) == 1 and not _could_be_person(antecedents[0]):
            return list(antecedents), k + 1, False
        return [], k, False
    # "Her daughter Irène Curie", "Rutherford's student Frederick Soddy".
    owner: str | None = None
    if item.kind == "word" and item.lower in _POSSESSIVE_PRONOUNS:
        owner = state.person if item.lower in ("his", "her") else None
        if owner is None:
            return [], k, False
    elif item.kind == "name" and item.possessive:
        owner = _canonical(item, state)
    if owner is not None:
        j = k + 1
        nouns = []
        while j < n and clause[j].kind == "word" and _is_nounish(clause[j].lower) and len(nouns) < 3:
            nouns.append(clause[j].lower)
            j += 1
        if nouns and j < n and clause[j].is_argument and clause[j].kind == "name":
            name = _canonical(clause[j], state)
            _add_relationship(state, name, " ".join(nouns) + " of", owner, True)
            # "His father X ..." keeps the topic on its owner; "Rutherford's student X" moves it to X.
            return [name], j + 1, item.kind == "name"
        return [], k, False
    if item.kind == "word" and item.lower == "the" and k + 1 < n and clause[k + 1].is_argument \
            and clause[k + 1].kind == "name":
        item, k = clause[k + 1], k + 1     # "The French Academy of Sciences ..."
    # "The element polonium ..."
    if item.kind == "word" and item.lower == "the" and k + 2 < n and clause[k + 1].lower in _CLASSIFIERS | _TITLE_NOUNS:
        target = clause[k + 2]
        if target.is_argument and target.kind == "name":
            return [_canonical(target, state)], k + 3, True
        if target.kind == "word" and _is_nounish(target.lower):
            return [target.lower], k + 3, True
        return [], k, False
    # Names, possibly a list: "Marie Curie and Pierre Curie", "Becquerel, Pierre Curie and Marie Curie".
    if item.is_argument and item.kind == "name":
        names = [item]
        j = k + 1
        while j + 1 < n:
            if clause[j].text == "," and clause[j + 1].lower == "and" and j + 2 < n and clause[j + 2].is_argument \
                    and clause[j + 2].kind == "name":
                names.append(clause[j + 2])
                j += 3
            elif (clause[j].text == "," or clause[j].lower == "and") and clause[j + 1].is_argument \
                    and clause[j + 1].kind == "name":
                names.append(clause[j + 1])
                j += 2
            elif (clause[j].lower == "and" and clause[j + 1].lower == "the" and j + 2 < n
                  and clause[j + 2].is_argument and clause[j + 2].kind == "name"):
                names.append(clause[j + 2])      # "The University of Paris and the Pasteur Institute"
                j += 3
            else:
                break
        return _expand_names(names, state), j, True
    return [], k, False


def _expand_names(names: list[_Item], state: _State) -> list[str]:
    """'Marie and Pierre Curie' → ['Marie Curie', 'Pierre Curie']; lone names via aliases."""
    labels = [_canonical(it, state) for it in names]
    last = names[-1].text.split(" ")
    if len(names) > 1 and len(last) == 2 and all(it.single for it in names[:-1]):
        labels = [f"{it.text} {last[-1]}" for it in names[:-1]] + [names[-1].text]
    return labels


# ---------------------------------------------------------------------------- predicates
@dataclass(slots=True)
class _VerbGroup:
    head: list[str]        # the main verb (and what follows it), without auxiliaries; [] for a bare copula
    end: int               # index after the group
    copula_only: bool      # "is", "was" with no other verb
    passive: bool          # "was awarded"
    copula: str = "was"    # the form of "be" in a passive ("is called", "was awarded")


def _verb_group(items: list[_Item], k: int) -> _VerbGroup | None:
    words: list[str] = []
    main = ""
    j = k
    while j < len(items) and items[j].kind == "word":
        w = items[j].lower
        if w in _MODALS or w in _NEGATIONS:
            return None
        if w in _AUXILIARIES:
            words.append(w)
            j += 1
            continue
        if _is_adverb(w) and words or (_is_adverb(w) and j + 1 < len(items) and items[j + 1].kind == "word"
                                        and _is_verb(items[j + 1].lower)):
            j += 1
            continue
        if _is_verb(w):
            words.append(w)
            main = w
            j += 1
        break
    if not words:
        return None
    while j < len(items) and items[j].kind == "word" and _is_adverb(items[j].lower) \
            and items[j].lower not in _PREPOSITIONS:
        j += 1
    if j < len(items) and items[j].kind == "word" and items[j].lower in _NEGATIONS:
        return None
    if not main:
        if words[-1] in _HAVE:
            return _VerbGroup([words[-1]], j, False, False)
        if any(w in _COPULA for w in words):
            return _VerbGroup([], j, True, False)
        return None
    copulas = [w for w in words[:-1] if w in _COPULA]
    copula = copulas[0] if copulas and copulas[0] in ("is", "are", "was", "were") else "was"
    return _VerbGroup([main], j, False, bool(copulas), copula)


def _normalise_predicate(words: list[str]) -> str:
    """Lower-case phrase without articles, possessives or adverbs ("became the director of" → "became director of")."""
    return " ".join(w for w in words if w not in _DETERMINERS and w not in _POSSESSIVE_PRONOUNS
                    and (w in _NP_ADJECTIVES or not _is_adverb(w)))


def _argument_list(items: list[_Item], k: int, state: _State) -> tuple[list[tuple[str, bool]], int]:
    """Arguments at ``k`` (after optional articles): 'X', 'X and Y', 'X, Y and Z'."""
    args: list[tuple[str, bool]] = []
    j = k
    while True:
        while j < len(items) and items[j].kind == "word" and items[j].lower in _DETERMINERS:
            j += 1
        if j >= len(items) or not items[j].is_argument:
            break
        item = items[j]
        args.append((_canonical(item, state), item.kind == "name"))
        j += 1
        if j + 1 < len(items) and (items[j].text == "," or items[j].lower == "and"):
            nxt = j + 1
            if items[j].text == "," and items[nxt].lower == "and":
                nxt += 1
            look = nxt
            while look < len(items) and items[look].kind == "word" and items[look].lower in _DETERMINERS:
                look += 1
            if look < len(items) and items[look].is_argument and items[look].kind == item.kind:
                j = nxt
                continue
        break
    return args, (j if args else k)


_NP_ADJECTIVES = {"first", "second", "third", "new", "last", "only", "early", "late", "young", "old"}


def _np_word(items: list[_Item], j: int, started: bool) -> bool:
    """Whether ``items[j]`` can continue a noun phrase (``started``: after an article or a noun)."""
    item = items[j]
    if item.kind == "name":
        # Adjectival names inside a phrase: "the first X-ray photographs", "a French physicist".
        return item.modifier and not item.possessive
    if item.kind != "word":
        return False
    w = item.lower
    if _is_nounish(w) or w in _NUMBER_WORDS or w in _NP_ADJECTIVES:
        return True
    # A participle used as an adjective: "applied physics", "charged particles".
    return (started and w.endswith("ed") and j + 1 < len(items) and items[j + 1].kind == "word"
            and _is_nounish(items[j + 1].lower))


def _noun_phrase(items: list[_Item], k: int, allow_bare: bool = True) -> tuple[str, int]:
    """A lower-case noun phrase at ``k`` ('the element polonium' → 'polonium'); '' if none."""
    j = k
    had_determiner = False
    while j < len(items) and items[j].kind == "word" and (items[j].lower in _DETERMINERS
                                                          or items[j].lower in _POSSESSIVE_PRONOUNS):
        had_determiner = True
        j += 1
    if not had_determiner and not allow_bare:
        return "", k
    words: list[str] = []
    while j < len(items) and len(words) < _MAX_NP_WORDS and _np_word(items, j, had_determiner or bool(words)):
        words.append(items[j].text)
        j += 1
    if not words or all(w.lower() in _NUMBER_WORDS | _NP_ADJECTIVES or _is_cap(w) for w in words):
        return "", k
    if not _is_nounish(items[j - 1].lower) or items[j - 1].kind != "word":
        return "", k            # a phrase ends with a noun
    if j < len(items) and items[j].kind == "name" and not items[j].modifier:
        return "", k           # "the physicist Pierre Curie": the name is the argument
    if len(words) > 1 and words[0].lower() in _CLASSIFIERS:
        words = words[1:]
    # "structure of the atom"
    if (j + 1 < len(items) and items[j].lower == "of" and items[j + 1].kind == "word"):
        tail, after = _noun_phrase(items, j + 1)
        if tail and not (after < len(items) and items[after].kind == "name"):
            words += ["of", tail]
            j = after
    return " ".join(words), j


def _read_predicate(sentence: str, items: list[_Item], k: int, subjects: list[str], state: _State, *,
                    allow_definition: bool, intro: tuple[str, _Item, bool] | None = None,
                    passive_participle: bool = False, depth: int = 0) -> None:
    """Read 'verb-group [middle words] object (trailing phrases)' at ``k`` for ``subjects``."""
    group = _verb_group(items, k)
    if group is None or depth > 3:
        return
    verb = list(group.head)
    passive = group.passive or passive_participle
    j = group.end
    n = len(items)
    if j < n and items[j].kind == "word" and items[j].lower in _PARTICLES and j + 1 < n and (
            items[j + 1].lower in _DETERMINERS | _POSSESSIVE_PRONOUNS or items[j + 1].is_argument
            or items[j + 1].lower in _PREPOSITIONS):
        verb.append(items[j].lower)
        j += 1
    # Definitions: "<Entity> is a/an/the <noun phrase>."
    if (allow_definition and group.copula_only and len(subjects) == 1 and j < n
            and items[j].lower in ("a", "an", "the")
            and any(items[x].lower in ("is", "was", "are", "were") for x in range(k, j))):
        last = n - 1
        while last > j and items[last].kind == "punct":
            last -= 1
        _add_definition(state, subjects[0], sentence[items[j].start:items[last].end])
    # Middle words between the verb group and the object: prepositions, articles, nouns.
    middle: list[_Item] = []
    m = j
    while m < n and len(middle) < 7:
        it = items[m]
        if it.is_argument:
            break
        w = it.lower
        if it.kind == "word" and (w in _PREPOSITIONS or w in _DETERMINERS or w in _POSSESSIVE_PRONOUNS) \
                or _np_word(items, m, bool(middle)):
            if it.kind == "word" and _is_nounish(w) and middle and middle[-1].lower == "to":
                break           # "to win": an infinitive, not a place
            middle.append(it)
            m += 1
            continue
        break
    direct_np, np_end = ("", j)
    if not group.copula_only and not passive:
        direct_np, np_end = _noun_phrase(items, j)
    core_words = verb[:]
    objects: list[tuple[str, bool]] = []
    predicate = ""
    after = j
    if m < n and items[m].is_argument:
        content = [it for it in middle if it.lower not in _DETERMINERS and it.lower not in _POSSESSIVE_PRONOUNS]
        if (len(content) > 1 and content[-1].lower in _CLASSIFIERS | _TITLE_NOUNS and items[m].kind == "name"
                and content[-2].lower in _PREPOSITIONS):
            # "after the planet Uranus", "with the chemist Gustave Bémont": the title is not part of the relation.
            middle = middle[:middle.index(content[-1])]
            content = content[:-1]
        last_middle = content[-1].lower if content else ""
        ok = (not content or last_middle in _PREPOSITIONS
              or (items[m].kind == "num" and _is_nounish(last_middle)))
        if verb and verb[-1] in _REPORTING_VERBS and content and content[0].lower in _PREPOSITIONS:
            ok = False        # "showed with Halban that ...": the object is a that-clause
        if ok:
            objects, after = _argument_list(items, m, state)
            words = verb + [it.lower if it.kind == "word" else it.text for it in middle]
            predicate = _normalise_predicate(words)
            if passive and predicate and not (middle and last_middle in _PREPOSITIONS):
                predicate = f"{group.copula} {predicate}"     # "was awarded the Nobel Prize"
            core_words = list(words)
            while core_words and core_words[-1] in _DETERMINERS | _POSSESSIVE_PRONOUNS:
                core_words.pop()
            if last_middle in _PREPOSITIONS:
                core_words.pop()
            if passive and predicate.startswith(group.copula + " "):
                core_words = [group.copula] + core_words
            if direct_np and np_end < m and items[np_end].lower in _PREPOSITIONS:
                _emit(state, subjects, _normalise_predicate(verb), [(direct_np, True)])
                if len(direct_np.split()) <= 2:
                    core_words = verb + direct_np.split()
    elif direct_np and (np_end >= n or items[np_end].kind == "punct" or items[np_end].lower in
                        _CONJUNCTIONS | _PREPOSITIONS | _WH):
        predicate = _normalise_predicate(verb)
        objects = [(direct_np, True)]
        after = np_end
        while after + 1 < n and items[after].lower == "and":
            more, more_end = _noun_phrase(items, after + 1)
            if not more or (more_end < n and items[more_end].kind == "word" and _is_verb(items[more_end].lower)):
                break
            if len(objects) == 1 and " " not in objects[0][0] and " " in more and items[after + 1].kind == "word" \
                    and items[after + 1].lower not in _DETERMINERS:
                # "the biological and medical effects": two modifiers of one noun, not two objects.
                objects = [(f"{objects[0][0]} and {more}", True)]
            else:
                objects.append((more, True))
            after = more_end
        core_words = verb + (direct_np.split() if len(direct_np.split()) <= 2 else [])
    if predicate and objects:
        _emit(state, subjects, predicate, objects)
        if intro is not None:
            _emit(state, subjects, _normalise_predicate(core_words + [intro[0]]),
                  [(_canonical(intro[1], state), intro[2])])
    elif not predicate:
        return
    # Trailing phrases: "... in 1898", "... with Pierre Curie".
    t = after
    while t < n:
        it = items[t]
        if it.kind == "word" and it.lower in _PREPOSITIONS and it.lower not in ("of", "for", "as", "than"):
            args, nxt = _argument_list(items, t + 1, state)
            if args:
                _emit(state, subjects, _normalise_predicate(core_words + [it.lower]), args)
                t = nxt
                continue
            break
        if it.kind == "punct" and it.text == "," and t + 1 < n and items[t + 1].lower in _PREPOSITIONS:
            t += 1
            continue
        if it.kind == "word" and it.lower == "and" and t + 1 < n and _verb_group(items, t + 1) is not None:
            _read_predicate(sentence, items, t + 1, subjects, state, allow_definition=False, depth=depth + 1)
            break
        if it.kind == "punct" and it.text == "," and t + 2 < n and items[t + 1].lower == "and" \
                and _verb_group(items, t + 2) is not None:
            _read_predicate(sentence, items, t + 2, subjects, state, allow_definition=False, depth=depth + 1)
            break
        break


def _emit(state: _State, subjects: list[str], predicate: str, objects: list[tuple[str, bool]]) -> None:
    if not predicate:
        return
    for subject in subjects:
        for obj, is_entity in objects:
            _add_relationship(state, subject, predicate, obj, is_entity)
