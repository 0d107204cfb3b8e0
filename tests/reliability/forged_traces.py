"""Forged traces for the retention fuzz tests: hypothesis strategies of trace-shaped triples a hostile client
could write straight into ``urn:graph:retrieval``.

A forgery is one to three traces, each a Question (any Question class, any start time or none, a
parent or none) with stages hanging off it: nodes named after the trace (its own URI scheme) or
outside any scheme, typed as any stage, linked by ``prov:wasDerivedFrom`` / ``prov:wasGeneratedBy``
(cycles included) and carrying values of the wrong kind (IRIs and blank nodes where literals
belong, bad dates, huge numbers, JSON nested thousands deep), ``tg:document`` pointing at source
documents, pages, chunks, other traces' answers, thoughts and observations or the trace's own
document URIs (its answer; an agent's thought and observation ids), and ``tg:selectedEdge``
pointing anywhere.  Sub-traces are claimed under another forged trace or a genuine trace; genuine
traces get forged links hooked onto their nodes; a trace's own document URIs are squatted by source
documents or answers marked by the wrong stage.

Every node of a forged trace is linked, first, to its own Question or an earlier node of its own
trace, so each one is reachable from a Question: what retention promises to remove.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance import uris
from trustgraph_base.schema import BLANK, DocumentMetadata, Term, Triple, iri, literal

R = ns.GRAPH_RETRIEVAL
QUESTION_CLASSES = [ns.TG_GRAPH_RAG_QUESTION, ns.TG_DOC_RAG_QUESTION, ns.TG_AGENT_QUESTION]
STAGE_CLASSES = [ns.TG_GROUNDING, ns.TG_EXPLORATION, ns.TG_FOCUS, ns.TG_SYNTHESIS, ns.TG_ERROR, ns.TG_ANALYSIS,
                 ns.TG_THOUGHT_TYPE, ns.TG_REFLECTION_TYPE, ns.TG_OBSERVATION_TYPE, ns.TG_CONCLUSION,
                 ns.TG_EDGE_SELECTION, ns.TG_QUESTION, ns.PROV_ENTITY]
LINKS = [ns.PROV_WAS_DERIVED_FROM, ns.PROV_WAS_GENERATED_BY]
VALUE_PREDICATES = [ns.TG_QUERY, ns.TG_EDGE_COUNT, ns.TG_DROPPED_COUNT, ns.TG_REASONING, ns.TG_ARGUMENTS,
                    ns.TG_OBSERVATION, ns.TG_THOUGHT, ns.TG_ANSWER, ns.TG_CONTENT, ns.TG_STAGE, ns.TG_ERROR_MESSAGE,
                    ns.TG_EDGE, ns.TG_CHUNK_COUNT, ns.RDFS_LABEL, ns.TG_CONCEPT, ns.TG_SCORE, ns.TG_IN_TOKEN,
                    ns.TG_OUT_TOKEN, ns.TG_LLM_MODEL, ns.TG_TOOL_ERROR]

#: Start times: long ago, unreadable, far in the future, not a literal; never "now" (the fuzz prunes by age).
TIMES = st.sampled_from([
    literal("2000-01-01T00:00:00Z", ns.XSD_DATETIME), literal("1970-01-01T00:00:00", ns.XSD_DATETIME),
    literal("99999-99-99", ns.XSD_DATETIME), literal("9999-12-31T23:59:59Z", ns.XSD_DATETIME),
    literal("-1"), literal("9" * 5000, ns.XSD_DATETIME), literal(""), iri("urn:x:time"), None,
])
VALUES = st.one_of(
    st.text(max_size=30).map(literal),
    st.sampled_from([literal("9" * 5000, ns.XSD_INTEGER), literal("-3", ns.XSD_INTEGER), literal("1e9"),
                     literal("[" * 5000 + "]" * 5000), literal('{"a": ' * 3000 + "1" + "}" * 3000),
                     iri("urn:x:value"), Term(BLANK, "b0"), literal("²³"), literal("x" * 20_000)]),
)


@dataclass
class Targets:
    """What forged traces point at: librarian documents of the collection, genuine traces' answers and nodes."""

    documents: list[str]        # sources, pages, chunks
    answers: list[str]          # genuine answers, thoughts, observations (never removed through a forged trace)
    genuine_nodes: list[str]    # nodes of genuine traces that forged links may point at (objects only)
    hook_nodes: list[str]       # nodes of genuine traces that forged triples may be hooked onto (as subjects)


@dataclass
class Forgery:
    triples: list[Triple] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)
    #: librarian documents to store first: (metadata, content)
    documents: list[tuple[DocumentMetadata, bytes]] = field(default_factory=list)


def _t(s: str, p: str, o: Term | str) -> Triple:
    return Triple(iri(s), iri(p), iri(o) if isinstance(o, str) else o, R)


def _root(kind: str, session: str) -> str:
    return {"graphrag": uris.question_uri, "docrag": uris.docrag_question_uri,
            "agent": uris.agent_session_uri}[kind](session)


def _stage_uris(kind: str, session: str) -> list[str]:
    if kind == "graphrag":
        return [uris.grounding_uri(session), uris.exploration_uri(session), uris.focus_uri(session),
                uris.synthesis_uri(session), uris.error_uri(session), uris.edge_selection_uri(session, 0),
                uris.edge_selection_uri(session, 1)]
    root = _root(kind, session)
    if kind == "docrag":
        return [f"{root}/grounding", f"{root}/exploration", f"{root}/synthesis", f"{root}/error"]
    return [f"{root}/i1", f"{root}/i1/thought", f"{root}/i1/observation", f"{root}/i2", f"{root}/i2/observation",
            f"{root}/i3", f"{root}/final", f"{root}/error"]


def _own_documents(kind: str, root: str) -> list[str]:
    """The librarian ids a trace's Question owns by the URI scheme: its answer; an agent's thoughts and observations."""
    answer = [uris.answer_uri_of(root)]
    return answer + ([f"{root}/i1/thought", f"{root}/i1/observation", f"{root}/i2/observation"]
                     if kind == "agent" else [])


@st.composite
def forgeries(draw, targets: Targets) -> Forgery:
    n = draw(st.integers(1, 3))
    sessions = [u.hex for u in draw(st.lists(st.uuids(), min_size=n, max_size=n, unique=True))]
    kinds = draw(st.lists(st.sampled_from(["graphrag", "docrag", "agent"]), min_size=n, max_size=n))
    roots = [_root(k, s) for k, s in zip(kinds, sessions, strict=True)]
    out = Forgery(roots=roots)
    built: list[str] = []       # nodes of the forged traces built so far (sub-trace parents)
    for kind, session, root in zip(kinds, sessions, roots, strict=True):
        parent = draw(st.one_of(st.none(), st.sampled_from(["urn:trustgraph:agent:nobody/i1", f"{root}/i1"]),
                                st.sampled_from(targets.hook_nodes or [None]),
                                st.sampled_from(built or [None])))
        own = [root]
        out.triples.append(_t(root, ns.RDF_TYPE, draw(st.sampled_from(QUESTION_CLASSES))))
        if parent:  # first in the batch: the parent the trace index records
            out.triples.append(_t(root, ns.PROV_WAS_DERIVED_FROM, parent))
        when = draw(TIMES)
        if when is not None:
            out.triples.append(_t(root, ns.PROV_STARTED_AT_TIME, when))
        width = draw(st.integers(0, 6))
        names = _stage_uris(kind, session) + [f"urn:x:{session}:{j}" for j in range(width)]
        for node in draw(st.lists(st.sampled_from(names), max_size=width, unique=True)):
            out.triples.append(_t(node, draw(st.sampled_from(LINKS)), draw(st.sampled_from(own))))
            for cls in draw(st.lists(st.sampled_from(STAGE_CLASSES), max_size=2)):
                out.triples.append(_t(node, ns.RDF_TYPE, cls))
            own.append(node)
            for link, to in draw(st.lists(st.tuples(st.sampled_from(LINKS), st.sampled_from(names + [root])),
                                          max_size=2)):
                out.triples.append(_t(node, link, to))  # cycles, and links to nodes of this trace not stored
            for _ in range(draw(st.integers(0, 2))):
                target = draw(st.sampled_from(targets.documents + targets.answers
                                              + [d for k, r in zip(kinds, roots, strict=True)
                                                 for d in _own_documents(k, r)]))
                out.triples.append(_t(node, ns.TG_DOCUMENT, target))
            for target in draw(st.lists(st.sampled_from(names + targets.genuine_nodes), max_size=2)):
                out.triples.append(_t(node, ns.TG_SELECTED_EDGE, target))
            for predicate, value in draw(st.lists(st.tuples(st.sampled_from(VALUE_PREDICATES), VALUES), max_size=3)):
                out.triples.append(_t(node, predicate, value))
        if draw(st.integers(0, 9)) == 0:  # now and then a wide trace
            out.triples += [_t(f"urn:x:{session}:fan:{k}", ns.PROV_WAS_DERIVED_FROM, root)
                            for k in range(draw(st.integers(50, 400)))]
        built += own
        answer = draw(st.sampled_from(_own_documents(kind, root)))
        squat = draw(st.sampled_from(["none", "source", "answer", "answer-marked-here", "answer-marked-elsewhere"]))
        if squat != "none":
            marker = {"answer-marked-here": own[-1], "answer-marked-elsewhere": "urn:trustgraph:prov:synthesis:x"}
            meta = DocumentMetadata(id=answer, kind="text/plain", title="Squatter",
                                    document_type="source" if squat == "source" else "answer",
                                    metadata=[Triple(iri(marker[squat]), iri(ns.TG_DOCUMENT), iri(answer))]
                                    if squat in marker else [])
            out.documents.append((meta, b"Otto Hahn discovered nuclear fission.\n"))
    for subject, link in draw(st.lists(st.tuples(st.sampled_from(targets.hook_nodes or ["urn:x:unused"]),
                                                 st.sampled_from(LINKS)), max_size=2)):
        if targets.hook_nodes:
            out.triples.append(_t(subject, link, draw(st.sampled_from(built))))
    return out
