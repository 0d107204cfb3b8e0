"""The extractive backend's algorithms: edge selection, composed answers, the ReAct policy."""

from __future__ import annotations

import hashlib
import re

import pytest

from trustgraph_flow.model.extractive import MODEL_ID, content_stems, mentions, stem, words
from trustgraph_flow.model.extractive.answers import (
    NO_DOCUMENT_ANSWER,
    NO_GRAPH_ANSWER,
    NO_MATCHING_SENTENCE,
    compose_document_answer,
    compose_graph_answer,
    humanise_predicate,
    rank_sentences,
    split_sentences,
)
from trustgraph_flow.model.extractive.edge_selection import select_edges
from trustgraph_flow.model.extractive.react_policy import find_arithmetic, is_informative, next_step, rank_tools

pytestmark = pytest.mark.unit

EDGES = [
    {"id": "e1", "s": "Marie Curie", "p": "married to", "o": "Pierre Curie"},
    {"id": "e2", "s": "Pierre Curie", "p": "worked at", "o": "University of Paris"},
    {"id": "e3", "s": "Marie Curie", "p": "worked at", "o": "Radium Institute"},
    {"id": "e4", "s": "Paris", "p": "capital of", "o": "France"},
    {"id": "e5", "s": "Marie Curie", "p": "born in", "o": "Warsaw"},
    {"id": "e6", "s": "Pierre Curie", "p": "born in", "o": "Paris"},
    {"id": "e7", "s": "Marie Curie", "p": "discovered", "o": "polonium"},
    {"id": "e8", "s": "polonium", "p": "named after", "o": "Poland"},
]
TOOLS = [
    {"name": "knowledge-query", "description": "Answer questions about entities and facts from the knowledge graph.",
     "arguments": [{"name": "question", "description": "the question to ask"}]},
    {"name": "calculator", "description": "Evaluate an arithmetic expression.",
     "arguments": [{"name": "expression", "description": "e.g. 2 + 3"}]},
    {"name": "document-search", "description": "Search the document library for passages about a topic.",
     "arguments": [{"name": "query", "description": "what to look for"}]},
]


# ----------------------------------------------------------------------- lexical basics
def test_model_id_says_what_it_is():
    assert MODEL_ID == "extractive"


@pytest.mark.parametrize("a, b", [("discovered", "discover"), ("discovers", "discover"), ("worked", "working"),
                                  ("prizes", "prize"), ("discoveries", "discovery"), ("died", "die"),
                                  ("named", "name"), ("married", "marry")])
def test_light_stemming_conflates_inflections(a, b):
    assert stem(a) == stem(b)


def test_words_drop_possessives_and_casefold():
    assert words("Marie Curie's HUSBAND, in 1903!") == ["marie", "curie", "husband", "in", "1903"]
    assert content_stems("Who discovered the polonium?") == {"discover", "polonium"}


def test_mentions_needs_whole_words():
    assert mentions("Where did Marie Curie's husband work?", "Marie Curie")
    assert not mentions("Where is Parisville?", "Paris")
    assert not mentions("a b", "a")  # too short to anchor


# ----------------------------------------------------------------------- edge selection
def test_selects_the_edge_that_answers_and_states_the_basis():
    selected = select_edges("Who discovered polonium?", EDGES, {"Marie Curie": 0.55, "polonium": 0.71})
    assert selected[0].id == "e7"
    reasoning = selected[0].reasoning
    assert "cosine 0.71 to the question (via 'polonium')" in reasoning
    assert "shares 'discovered'" in reasoning
    assert "touches anchor 'polonium'" in reasoning
    assert re.search(r"score \d\.\d\d$", reasoning)
    assert {s.id for s in selected} <= {"e7", "e8"}


def test_reasoning_numbers_match_the_scores():
    for edge in select_edges("Where was Pierre Curie born?", EDGES, {"Pierre Curie": 0.62}):
        assert edge.reasoning.endswith(f"score {edge.score:.2f}")


def test_score_and_concept_are_returned_as_data():
    selected = select_edges("Who discovered polonium?", EDGES, {"Marie Curie": 0.55, "polonium": 0.71})
    best = selected[0].as_object()
    assert best == {"id": "e7", "reasoning": selected[0].reasoning, "score": selected[0].score,
                    "concept": "polonium"}  # the anchor it touches
    assert isinstance(best["score"], float) and best["reasoning"].endswith(f"score {best['score']:.2f}")
    # one hop from an anchor: the anchor it was reached from
    bridged = next(s for s in select_edges("Where did Marie Curie's husband work?", EDGES,
                                           {"Marie Curie": 0.55, "Pierre Curie": 0.45}, relative=0.3) if s.id == "e2")
    assert bridged.concept == "Marie Curie"
    # no anchor in the question: the entity its cosine came through
    assert {s.concept for s in select_edges("Tell me about the famous physicist", EDGES,
                                            {"Pierre Curie": 0.6})} == {"Pierre Curie"}
    # words alone: no concept, and the object says so by leaving it out
    lexical = select_edges("Who studied elements?", [{"id": "x1", "s": "Radium", "p": "studied by", "o": "Student"}])
    assert lexical and lexical[0].concept == "" and "concept" not in lexical[0].as_object()


def test_two_hop_question_reaches_the_anchor_and_its_neighbour_edges():
    # The default relative cut (0.5 of the best score) favours precision; a looser one reaches the second hop.
    scores = {"Marie Curie": 0.55, "Pierre Curie": 0.45}
    selected = select_edges("Where did Marie Curie's husband work?", EDGES, scores, relative=0.3)
    ids = [s.id for s in selected]
    assert ids[0] == "e3"
    assert "e2" in ids  # one hop from Marie Curie through Pierre Curie
    bridged = next(s for s in selected if s.id == "e2")
    assert "one hop from anchor 'Marie Curie' via 'Pierre Curie' (x0.6)" in bridged.reasoning
    assert "e2" not in [s.id for s in select_edges("Where did Marie Curie's husband work?", EDGES, scores)]


def test_never_invents_ids_and_respects_the_limit():
    selected = select_edges("Marie Curie Pierre Curie Paris polonium", EDGES, limit=3)
    assert len(selected) == 3
    assert {s.id for s in selected} <= {e["id"] for e in EDGES}


def test_ties_are_broken_by_id_and_results_are_deterministic():
    edges = [{"id": f"x{i}", "s": "Radium", "p": "studied by", "o": f"Student {i}"} for i in (3, 1, 2)]
    first = select_edges("Who studied radium?", edges)
    assert [s.id for s in first] == ["x1", "x2", "x3"]
    assert select_edges("Who studied radium?", list(reversed(edges))) == first


def test_nothing_relevant_selects_nothing():
    assert select_edges("How do bananas ripen?", EDGES) == []
    assert select_edges("Who discovered polonium?", []) == []


def test_entity_scores_alone_can_select_and_say_so():
    selected = select_edges("Tell me about the famous physicist", EDGES, {"Pierre Curie": 0.6})
    assert selected and all("via 'Pierre Curie'" in s.reasoning for s in selected)
    assert {s.id for s in selected} == {"e1", "e2", "e6"}


class _CountingEmbedder:
    """A real embedder wrapper that records what it was asked to embed (no fake vectors)."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []
        self.model_id, self.dimension = inner.model_id, inner.dimension

    def embed(self, texts):
        self.calls.append(list(texts))
        return self.inner.embed(texts)


def test_predicate_embeddings_are_opt_in(local_embedder):
    counting = _CountingEmbedder(local_embedder)
    select_edges("Where did Marie Curie's husband work?", EDGES, embedder=counting)
    assert counting.calls == []
    selected = select_edges("Where did Marie Curie's husband work?", EDGES, embedder=counting,
                            embed_predicates=True, relative=0.3)
    assert len(counting.calls) == 1 and len(counting.calls[0]) == 1 + len({e["p"] for e in EDGES})
    married = next(s for s in selected if s.id == "e1")
    assert "predicate 'married to' has cosine" in married.reasoning


# ------------------------------------------------------------------------------ answers
def test_graph_answer_uses_only_the_selected_edges():
    knowledge = [
        {"s": "Marie Curie", "p": "discovered", "o": "polonium", "reasoning": "r"},
        {"s": "Marie Curie", "p": "discovered", "o": "radium"},
        {"s": "Pierre Curie", "p": "worked_at", "o": "University of Paris"},
        {"s": "Marie Curie", "p": "marriedTo", "o": "Pierre Curie"},
    ]
    answer = compose_graph_answer("Who discovered polonium?", knowledge)
    assert answer == ("According to the knowledge graph: Marie Curie discovered polonium and radium; "
                      "married to Pierre Curie. Pierre Curie worked at University of Paris.")
    allowed = set(words(" ".join(f"{k['s']} {humanise_predicate(k['p'])} {k['o']}" for k in knowledge)))
    allowed |= set(words("According to the knowledge graph and"))
    assert set(words(answer)) <= allowed


def test_graph_answer_without_edges_says_so():
    assert compose_graph_answer("q", []) == NO_GRAPH_ANSWER
    assert NO_GRAPH_ANSWER == "No relevant information was found in the knowledge graph."


DOCS = [
    {"id": "chunk-1", "score": 0.81, "text": "Marie Curie was born in Warsaw in 1867. She moved to Paris in 1891.\n\n"
                                             "## Studies\nIn Paris she studied physics at the Sorbonne."},
    {"id": "chunk-2", "score": 0.64, "text": "Pierre Curie died in Paris on 19 April 1906. A horse-drawn wagon struck "
                                             "him in the rain. Polonium was discovered in 1898."},
]


def test_document_answer_quotes_sentences_verbatim_with_chunk_ids():
    answer = compose_document_answer("When did Marie Curie move to Paris?", DOCS)
    assert answer.startswith("According to the documents:\n")
    quotes = re.findall(r'- "(.+?)" \[(chunk-\d)\]', answer)
    # "She" points back, so the sentence before comes along.
    assert quotes[0] == ("Marie Curie was born in Warsaw in 1867. She moved to Paris in 1891.", "chunk-1")
    texts = {d["id"]: " ".join(d["text"].split()) for d in DOCS}
    for quote, chunk_id in quotes:
        assert quote in texts[chunk_id]


def test_document_answer_keeps_the_sentence_a_pronoun_points_back_to():
    answer = compose_document_answer("How did Pierre Curie die?", DOCS)
    quote = "Pierre Curie died in Paris on 19 April 1906. A horse-drawn wagon struck him in the rain."
    assert f'"{quote}" [chunk-2]' in answer


def test_document_answer_without_documents_or_matches():
    assert compose_document_answer("q?", []) == NO_DOCUMENT_ANSWER
    assert compose_document_answer("How do bananas ripen?", DOCS) == NO_MATCHING_SENTENCE


def test_headings_are_not_quoted_and_overlapping_chunks_are_deduplicated():
    docs = [{"id": "a", "text": "## Radium studies\nRadium glows in the dark."},
            {"id": "b", "text": "Radium glows in the dark. Other text."}]
    ranked = rank_sentences("Does radium glow?", docs)
    assert [q.text for q in ranked] == ["Radium glows in the dark."]


def test_sentence_splitter_respects_abbreviations_and_quotes():
    assert split_sentences('He said "Yes." Then Dr. Smith left. M. Curie won!') == [
        'He said "Yes."', "Then Dr. Smith left.", "M. Curie won!"]


def test_document_rerank_with_embeddings_is_deterministic(local_embedder):
    first = compose_document_answer("Where was Marie Curie born?", DOCS, embedder=local_embedder)
    assert "Warsaw" in first
    assert compose_document_answer("Where was Marie Curie born?", DOCS, embedder=local_embedder) == first


# ------------------------------------------------------------------------- react policy
@pytest.mark.parametrize("question, expression", [
    ("What is 17 * 23?", "17 * 23"), ("Compute (2 + 3) x 4", "(2 + 3) * 4"), ("what is 12 plus 5", "12 + 5"),
    ("How much is 2^10?", "2 ** 10"), ("Who discovered polonium?", None),
])
def test_find_arithmetic(question, expression):
    assert find_arithmetic(question) == expression


def test_arithmetic_goes_to_the_calculator_with_its_argument_name():
    reply = next_step("What is 17 * 23?", TOOLS)
    assert reply == ("Thought: The question contains the arithmetic expression 17 * 23; the calculator tool "
                     'evaluates it.\nAction: calculator\nArgs: {"expression": "17 * 23"}')


def test_entity_questions_prefer_the_knowledge_graph_tool():
    reply = next_step("Who discovered polonium?", TOOLS)
    assert "Action: knowledge-query" in reply and 'Args: {"question": "Who discovered polonium?"}' in reply
    assert "named entities" in reply


def test_description_match_picks_the_document_tool():
    reply = next_step("search the document library for passages about radium", TOOLS)
    assert "Action: document-search" in reply and '"query": ' in reply


def test_no_information_tries_the_next_tool_once_then_gives_up():
    history = [{"thought": "t", "action": "knowledge-query", "arguments": {"question": "q"},
                "observation": "No relevant information was found in the knowledge graph."}]
    second = next_step("Who discovered polonium?", TOOLS, history)
    assert "Action: document-search" in second and "returned no information" in second
    history.append({"thought": "t", "action": "document-search", "arguments": {}, "observation": ""})
    final = next_step("Who discovered polonium?", TOOLS, history)
    assert "Final Answer: I could not find an answer" in final


def test_final_answer_repeats_the_useful_observation():
    history = [{"thought": "t", "action": "calculator", "arguments": {"expression": "17 * 23"}, "observation": "391"}]
    assert next_step("What is 17 * 23?", TOOLS, history).endswith("Final Answer: 391")


def test_no_tools_means_an_honest_final_answer():
    assert next_step("Who?", []).endswith("Final Answer: I cannot answer: no tools are available.")


@pytest.mark.parametrize("observation, informative", [
    ("Marie Curie", True), ("", False), ("  ", False), ("No relevant information was found.", False),
    ("Error: tool failed", False), ("I don't know.", False), ("391", True),
])
def test_is_informative(observation, informative):
    assert is_informative(observation) is informative


def test_rank_tools_with_embeddings_adds_a_cosine(local_embedder):
    ranked = rank_tools("Evaluate this arithmetic expression", TOOLS, embedder=local_embedder)
    assert ranked[0].name == "calculator" and "description cosine" in ranked[0].basis


# ------------------------------------------------------------------ the sample corpus
def test_useful_answers_on_the_sample_corpus():
    """Graph built by the pattern extractor from the sample corpus; every edge is a candidate."""
    from trustgraph_flow.ingest.chunking import chunk_text
    from trustgraph_flow.ingest.extraction import extract
    from trustgraph_flow.ingest.sample_corpus import sample_documents, sample_questions, source_text

    edges: dict[str, dict] = {}
    chunks = []
    for document in sample_documents():
        slug = document.id.rsplit("/", 1)[-1]
        for chunk in chunk_text(source_text(slug), 1000, 100):
            chunks.append({"id": f"{slug}#{chunk.index}", "text": chunk.text})
            for rel in extract(chunk.text).relationships:
                edge_id = hashlib.sha256(f"{rel.subject}|{rel.predicate}|{rel.object}".encode()).hexdigest()[:8]
                edges[edge_id] = {"id": edge_id, "s": rel.subject, "p": rel.predicate, "o": rel.object}
    candidates = list(edges.values())
    by_id = {e["id"]: e for e in candidates}
    outcomes = {}
    for question in sample_questions():
        if question.kind == "graph":
            selected = select_edges(question.question, candidates)
            answer = compose_graph_answer(question.question, [by_id[s.id] for s in selected])
        elif question.kind == "document":
            answer = compose_document_answer(question.question, chunks)
        else:
            continue
        outcomes[question.question] = (all(e.lower() in answer.lower() for e in question.expected), answer)
    answered = sum(ok for ok, _ in outcomes.values())
    missed = {q: a[:200] for q, (ok, a) in outcomes.items() if not ok}
    assert answered >= 0.8 * len(outcomes), f"{answered}/{len(outcomes)} answered; missed: {missed}"


@pytest.fixture(scope="module")
def local_embedder():
    from trustgraph_flow.model.embeddings import get_embedder

    return get_embedder("local")
