"""The pattern extractor's knowledge of English words: closed word lists and the word classes built on them.

The extractor has no tagger or dictionary; whether a word is a determiner, a preposition, a
verb or part of a noun phrase is decided here, from these lists and a few suffix rules
("-ed" verbs, "-ly" adverbs).  Keeping every list in one place lets a change to what counts as
a verb or a name connector be made once, for every rule that reads words.
"""

from __future__ import annotations

DETERMINERS = {"the", "a", "an"}
POSSESSIVE_PRONOUNS = {"his", "her", "its", "their"}
PRONOUNS = {"he", "she", "it", "they"}
OBJECT_PRONOUNS = {"him", "her", "it", "them", "this", "that", "these", "those", "himself", "herself", "itself",
                   "themselves", "one", "ones", "both", "each", "either", "neither", "all", "some", "any", "many",
                   "most", "several", "few", "such", "other", "others", "another", "something", "everything",
                   "nothing", "anything", "someone", "everyone", "what", "whatever"}
COPULA = {"is", "are", "was", "were", "am", "be", "been", "being"}
HAVE = {"has", "have", "had", "having"}
AUXILIARIES = COPULA | HAVE | {"did", "does", "do"}
MODALS = {"can", "could", "may", "might", "must", "shall", "should", "will", "would", "cannot", "ought"}
NEGATIONS = {"not", "never", "no", "nor", "neither", "hardly", "barely", "scarcely"}
PREPOSITIONS = {"in", "at", "on", "from", "to", "with", "by", "for", "of", "into", "after", "during", "under", "as",
                "near", "until", "since", "through", "within", "onto", "upon", "among", "against", "without",
                "before", "over", "between", "across", "about", "towards", "toward", "beside", "beyond", "outside",
                "inside", "throughout", "behind", "like", "via", "per", "along", "around", "alongside"}
PARTICLES = {"up", "out", "off", "down", "away", "back", "over"}
CONJUNCTIONS = {"and", "or", "but", "yet", "so", "nor"}
SUBORDINATORS = {"when", "after", "before", "although", "though", "because", "since", "while", "whereas", "as",
                 "once", "until", "if", "unless", "whether", "whenever", "wherever"}
WH = {"who", "whom", "whose", "which", "that", "where", "when", "why", "how", "what"}
ADVERBS = {"also", "later", "then", "first", "soon", "eventually", "subsequently", "jointly", "together",
           "independently", "finally", "again", "still", "already", "formally", "officially", "once", "often",
           "quickly", "briefly", "famously", "originally", "initially", "immediately", "publicly", "largely",
           "partly", "mainly", "shortly", "just", "only", "even", "thus", "therefore", "afterwards",
           "afterward", "anyway", "long", "now", "ever", "always", "twice", "thereafter", "ultimately", "nevertheless",
           "successfully", "personally", "directly", "widely", "especially", "notably", "indeed",
           "instead", "here", "there", "too", "almost", "nearly", "mostly", "rapidly", "slowly", "carefully",
           "last", "newly", "recently", "today", "yet", "meanwhile", "moreover", "however"}
NOT_ADVERBS_LY = {"family", "italy", "july", "supply", "apply", "reply", "fly", "ally", "anomaly", "rally",
                  "assembly", "monopoly", "butterfly", "jelly", "belly", "lily", "bully", "holy", "early"}
FUNCTION_WORDS = (DETERMINERS | POSSESSIVE_PRONOUNS | PRONOUNS | OBJECT_PRONOUNS | AUXILIARIES | MODALS
                  | NEGATIONS | PREPOSITIONS | CONJUNCTIONS | SUBORDINATORS | WH | ADVERBS
                  | {"i", "we", "you", "me", "us", "my", "our", "your", "than", "very", "much", "more", "less",
                     "there", "whose", "own", "same", "not", "whom", "every", "few", "little", "least", "so",
                     "such", "either", "rather", "quite", "else", "per", "whereby", "thereby",
                     "among", "upon", "amongst"})
# Verbs that usually report a that-clause: with them, "showed with X that ..." is not a relation to X.
REPORTING_VERBS = {"showed", "shown", "shows", "suggested", "proposed", "found", "observed", "said", "believed",
                   "concluded", "reported", "demonstrated", "proved", "realised", "realized", "noticed", "argued",
                   "claimed", "knew", "thought", "explained", "predicted", "announced", "stated", "wrote",
                   "noted", "learned", "recognised", "recognized", "confirmed", "established", "understood"}
PLURAL_ENDINGS = ("ors", "ers", "ists", "ies", "ians", "ants", "ents", "ions", "ings", "eers", "ches", "ices")
NUMBER_WORDS = {"two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
                "dozen", "hundred", "thousand", "million"}
IRREGULAR_VERBS = {
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
   "stuck", "stung", "spun", "lay", "lies", "remains", "contains", "emits", "includes", "holds",
   "describes", "denotes", "measures", "decays", "glows", "occurs", "honours", "honors", "bears", "carries",
   "houses", "hosts", "owns", "lists", "uses", "forms", "produces", "consists", "requires", "marks",
   "lives", "works", "studies", "directs", "belongs", "refers", "represents", "equals",
   "exceeds", "follows", "precedes", "replaces", "keeps", "runs", "sits", "serves",
}
NOT_VERBS_ED = {"hundred", "red", "bed", "shed", "sled", "seed", "need", "feed", "speed", "breed", "creed",
                "deed", "greed", "weed", "tweed", "steed", "reed", "bleed", "indeed", "sacred", "kindred",
                "naked", "wicked", "rugged", "ragged", "beloved", "learned", "aged", "cupboard", "med", "wed"}
TITLE_NOUNS = {"planet", "god", "goddess", "chemist", "physicist", "journalist", "president", "scientist",
               "mathematician", "engineer", "doctor", "physician", "biologist", "astronomer", "architect",
               "writer", "explorer", "king", "queen", "emperor", "ship", "inventor", "philosopher"}
CLASSIFIERS = {"element", "elements", "metal", "gas", "isotope", "isotopes", "mineral", "ore", "unit", "word",
               "term", "name", "substance", "compound", "salt", "salts", "city", "town", "country", "village",
               "river", "island", "journal", "book", "prize", "award"}
# Capitalised words that never start a name (sentence-initial function words and the like).
NOT_NAME = (FUNCTION_WORDS | NUMBER_WORDS | PRONOUNS
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
MONTHS = {"january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december"}
NAME_CONNECTORS = {"of", "de", "du", "des", "von", "van", "der", "den", "da", "di", "del", "della", "la", "le",
                   "y", "zu", "ten", "ter", "af", "al", "bin", "ibn", "et", "und"}
INSTITUTION_WORDS = {"institute", "university", "laboratory", "college", "academy", "society", "school",
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
ABBREVIATIONS = {"mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "mt", "no", "vs", "etc", "e.g", "i.e", "fig",
                 "vol", "ca", "approx", "dept", "univ", "inc", "ltd", "co", "corp", "gen", "col", "capt", "lt",
                 "sgt", "rev", "hon", "pp", "ed", "eds", "op", "cit", "al", "cf", "viz", "mme", "mlle", "messrs"}
# Words that open a place name rather than a person's ("Le Croisic", "Saint Petersburg").
PLACE_PREFIXES = {"le", "la", "les", "el", "los", "las", "san", "santa", "saint", "st", "fort", "port", "lake",
                  "mount", "new", "north", "south", "east", "west", "upper", "lower", "great", "cape", "the"}
# Adjectives that stay in a noun phrase and in a predicate ("the first X-ray photographs").
NP_ADJECTIVES = {"first", "second", "third", "new", "last", "only", "early", "late", "young", "old"}


def is_cap(text: str) -> bool:
    return text[:1].isupper()


def is_year(text: str) -> bool:
    return len(text) == 4 and text.isdigit() and 1000 <= int(text) <= 2099


def is_verb(word: str) -> bool:
    if word in IRREGULAR_VERBS:
        return True
    return len(word) > 3 and word.endswith("ed") and word not in NOT_VERBS_ED


def is_adverb(word: str) -> bool:
    return word in ADVERBS or (len(word) > 4 and word.endswith("ly") and word not in NOT_ADVERBS_LY)


def is_nounish(word: str) -> bool:
    """A lower-case word that can be part of a noun phrase."""
    if not word.isalpha() and "-" not in word:
        return False
    if word in FUNCTION_WORDS or word in MODALS or is_verb(word) or is_adverb(word):
        return False
    if word.endswith("ing") and len(word) > 5:
        return False
    return len(word) > 1
