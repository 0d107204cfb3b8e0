"""URIs of every entity of a trace and of extraction provenance: building them, and reading trace URIs back.

Query-time URIs follow docs/trace-model.md exactly.  One table,
:data:`TRACE_URI_FORMATS`, says how every node of a trace is named; the builders below and
:func:`parse_trace_uri` (URI -> kind, session, stage, index) both follow it, so whatever reads
a URI reads it the way it was built.  Extraction URIs for pages and chunks are derived
deterministically (UUID v5) from the document and position, so re-loading the same document
yields the same URIs and idempotent writes.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from urllib.parse import quote

_NAMESPACE = uuid.UUID("6b1e0d2c-3f1a-5c44-9b1e-7f2a8e5d4c31")
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._\-]{0,127}\Z")


def new_id() -> str:
    """A fresh random id for one query (uuid4, as text)."""
    return str(uuid.uuid4())


def check_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is safe inside a URI (letters, digits, ``._-``), else raise ValueError."""
    if not _SESSION_ID.match(session_id or ""):
        raise ValueError(f"invalid session id {str(session_id)[:80]!r}: use 1-128 letters, digits, '.', '_' or '-'")
    return session_id


# ---------------------------------------------------------------- the trace URI scheme
#: ``(kind, stage) -> format`` of every node of a trace and of the librarian documents it names; ``{s}`` is the
#: session (a query's uuid, an agent's session id), ``{i}`` the index (an edge selection's, from 0; an Analysis'
#: and its Thought's and Observation's, a plan's step result's and a supervisor's finding's, from 1).  An agent's
#: Thought, Observation, StepResult and Finding share their URI with the librarian document holding their text.
TRACE_URI_FORMATS: dict[tuple[str, str], str] = {
    ("graphrag", "question"): "urn:trustgraph:question:{s}",
    ("graphrag", "grounding"): "urn:trustgraph:prov:grounding:{s}",
    ("graphrag", "exploration"): "urn:trustgraph:prov:exploration:{s}",
    ("graphrag", "focus"): "urn:trustgraph:prov:focus:{s}",
    ("graphrag", "edge"): "urn:trustgraph:prov:edge:{s}:{i}",
    ("graphrag", "synthesis"): "urn:trustgraph:prov:synthesis:{s}",
    ("graphrag", "error"): "urn:trustgraph:prov:error:{s}",
    ("graphrag", "answer"): "urn:trustgraph:answer:{s}",
    ("docrag", "question"): "urn:trustgraph:docrag:{s}",
    ("docrag", "grounding"): "urn:trustgraph:docrag:{s}/grounding",
    ("docrag", "exploration"): "urn:trustgraph:docrag:{s}/exploration",
    ("docrag", "synthesis"): "urn:trustgraph:docrag:{s}/synthesis",
    ("docrag", "error"): "urn:trustgraph:docrag:{s}/error",
    ("docrag", "answer"): "urn:trustgraph:docrag:{s}/answer",
    ("agent", "question"): "urn:trustgraph:agent:{s}",
    ("agent", "analysis"): "urn:trustgraph:agent:{s}/i{i}",
    ("agent", "thought"): "urn:trustgraph:agent:{s}/i{i}/thought",
    ("agent", "observation"): "urn:trustgraph:agent:{s}/i{i}/observation",
    ("agent", "pattern-decision"): "urn:trustgraph:agent:{s}/pattern-decision",
    ("agent", "plan"): "urn:trustgraph:agent:{s}/plan",
    ("agent", "step"): "urn:trustgraph:agent:{s}/step/{i}",
    ("agent", "decomposition"): "urn:trustgraph:agent:{s}/decompose",
    ("agent", "finding"): "urn:trustgraph:agent:{s}/finding/{i}",
    ("agent", "synthesis"): "urn:trustgraph:agent:{s}/synthesis",
    ("agent", "conclusion"): "urn:trustgraph:agent:{s}/final",
    ("agent", "error"): "urn:trustgraph:agent:{s}/error",
    ("agent", "answer"): "urn:trustgraph:agent:{s}/answer",
}
#: The stage that completes a trace of each kind.
FINAL_STAGES = {"graphrag": "synthesis", "docrag": "synthesis", "agent": "conclusion"}
#: The stages whose URI names a librarian document the trace stores: its answer, and an agent's thoughts and
#: observations.
DOCUMENT_STAGES = frozenset({"answer", "thought", "observation", "step", "finding"})


def trace_uri(kind: str, session: str, stage: str, index: int | None = None) -> str:
    """The URI of node ``stage`` of the trace of ``kind`` named after ``session`` (``index``: its number).

    ``session`` is not checked here: the builders below check what they are given, and a
    session read back by :func:`parse_trace_uri` is one the scheme allows.
    """
    try:
        fmt = TRACE_URI_FORMATS[kind, stage]
    except KeyError:
        raise ValueError(f"a {kind} trace has no stage {stage!r}") from None
    if ("{i}" in fmt) != (index is not None):
        raise ValueError(f"stage {stage!r} of a {kind} trace " + ("needs an index" if index is None else "has none"))
    return fmt.format(s=session, i=index)


# ---------------------------------------------------------------- GraphRAG
def question_uri(session: str) -> str:
    return trace_uri("graphrag", session, "question")


def grounding_uri(session: str) -> str:
    return trace_uri("graphrag", session, "grounding")


def exploration_uri(session: str) -> str:
    return trace_uri("graphrag", session, "exploration")


def focus_uri(session: str) -> str:
    return trace_uri("graphrag", session, "focus")


def edge_selection_uri(session: str, index: int) -> str:
    """The i-th (0-based) edge selection of a focus."""
    return trace_uri("graphrag", session, "edge", index)


def synthesis_uri(session: str) -> str:
    return trace_uri("graphrag", session, "synthesis")


def answer_document_uri(session: str) -> str:
    """Librarian id of a GraphRAG answer text."""
    return trace_uri("graphrag", session, "answer")


def error_uri(session: str) -> str:
    """The Error entity that ends a failed GraphRAG query's trace."""
    return trace_uri("graphrag", session, "error")


# ---------------------------------------------------------------- DocumentRAG
def docrag_question_uri(session: str) -> str:
    return trace_uri("docrag", session, "question")


def docrag_grounding_uri(session: str) -> str:
    return trace_uri("docrag", session, "grounding")


def docrag_exploration_uri(session: str) -> str:
    return trace_uri("docrag", session, "exploration")


def docrag_synthesis_uri(session: str) -> str:
    return trace_uri("docrag", session, "synthesis")


def docrag_answer_uri(session: str) -> str:
    """Librarian id of a DocumentRAG answer text."""
    return trace_uri("docrag", session, "answer")


def docrag_error_uri(session: str) -> str:
    return trace_uri("docrag", session, "error")


# ---------------------------------------------------------------- agent
def agent_session_uri(session_id: str) -> str:
    return trace_uri("agent", check_session_id(session_id), "question")


def agent_iteration_uri(session_id: str, n: int) -> str:
    """Analysis ``n`` (1-based) of an agent session."""
    if n < 1:
        raise ValueError("agent iterations are numbered from 1")
    return trace_uri("agent", check_session_id(session_id), "analysis", n)


def agent_thought_uri(session_id: str, n: int) -> str:
    """The Thought of Analysis ``n``, and the id of the librarian document holding its text."""
    if n < 1:
        raise ValueError("agent iterations are numbered from 1")
    return trace_uri("agent", check_session_id(session_id), "thought", n)


def agent_observation_uri(session_id: str, n: int) -> str:
    """The Observation of Analysis ``n`` (what its tool returned), and the id of the librarian document holding it."""
    if n < 1:
        raise ValueError("agent iterations are numbered from 1")
    return trace_uri("agent", check_session_id(session_id), "observation", n)


def agent_pattern_uri(session_id: str, stage: str, index: int | None = None) -> str:
    """A node of a plan-then-execute or supervisor run: ``pattern-decision``, ``plan``, ``step`` (``index`` from 1),
    ``decomposition``, ``finding`` (``index`` from 1) or ``synthesis``."""
    if index is not None and index < 1:
        raise ValueError("plan steps and findings are numbered from 1")
    return trace_uri("agent", check_session_id(session_id), stage, index)


def agent_final_uri(session_id: str) -> str:
    return trace_uri("agent", check_session_id(session_id), "conclusion")


def agent_error_uri(session_id: str) -> str:
    """The Error entity that ends a failed agent run's trace."""
    return trace_uri("agent", check_session_id(session_id), "error")


def agent_answer_uri(session_id: str) -> str:
    """Librarian id of an agent's final answer."""
    return trace_uri("agent", check_session_id(session_id), "answer")


# ---------------------------------------------------------------- extraction
def document_uri(document_id: str) -> str:
    """A document's IRI: the id itself when it is already an IRI, else ``urn:document:<id>``."""
    if re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:", document_id) and " " not in document_id:
        return document_id
    return f"urn:document:{quote(document_id, safe='')}"


def page_uri(document: str, page_number: int) -> str:
    return f"urn:page:{uuid.uuid5(_NAMESPACE, f'{document}#page={page_number}')}"


def chunk_uri(document: str, page_number: int, chunk_index: int) -> str:
    return f"urn:chunk:{uuid.uuid5(_NAMESPACE, f'{document}#page={page_number}#chunk={chunk_index}')}"


def subgraph_uri(chunk: str) -> str:
    """The Subgraph holding what was extracted from one chunk."""
    return f"https://trustgraph.ai/subgraph/{quote(chunk, safe='')}"


def activity_uri(component: str, target: str) -> str:
    """One run of a component (decoder, chunker, extractor) over one target."""
    return f"https://trustgraph.ai/activity/{quote(component, safe='')}/{quote(target, safe='')}"


def agent_uri(name: str) -> str:
    """A software agent (component) in the PROV sense."""
    return f"https://trustgraph.ai/agent/{quote(name, safe='')}"


def entity_uri(label: str) -> str:
    """IRI of a knowledge-graph entity or relation extracted with label ``label``."""
    slug = re.sub(r"[^0-9a-z]+", "-", label.casefold()).strip("-") or "x"
    if slug == "x" or not re.fullmatch(r"[0-9a-z\-]+", slug):
        slug = quote(label.casefold(), safe="")
    return f"http://trustgraph.ai/e/{slug}"


# ---------------------------------------------------------------- reading a trace URI
@dataclass(frozen=True)
class TraceUri:
    """A URI of the trace scheme, read back: the trace it is named after and the node of it it names.

    :param kind: ``graphrag``, ``docrag`` or ``agent``.
    :param session: the query's uuid, or the agent's session id.
    :param stage: a stage of :data:`TRACE_URI_FORMATS` (``question``, ``grounding``, ``exploration``, ``focus``,
        ``edge``, ``synthesis``, ``error``, ``answer``, ``analysis``, ``thought``, ``observation``, ``conclusion``),
        or ``""`` for a DocumentRAG or agent URI whose suffix names no stage of the scheme (still named after
        that trace).
    :param index: an edge selection's number, or that of an Analysis, its Thought or its Observation (``None``
        for the other stages, and for a number too long to read).
    """

    kind: str
    session: str
    stage: str
    index: int | None = None

    @property
    def question(self) -> str:
        """The Question URI of the trace this URI is named after."""
        return trace_uri(self.kind, self.session, "question")

    def stage_uri(self, stage: str, index: int | None = None) -> str:
        """The URI of another node of the same trace."""
        return trace_uri(self.kind, self.session, stage, index)


_SESSION = r"[A-Za-z0-9._\-]+"
_TRACE_NODE = re.compile(
    rf"urn:trustgraph:(?:question:(?P<question>{_SESSION})"
    rf"|prov:(?P<stage>grounding|exploration|focus|synthesis|error):(?P<stage_session>{_SESSION})"
    rf"|prov:edge:(?P<edge_session>{_SESSION}):(?P<edge>[0-9]+)"
    rf"|answer:(?P<answer>{_SESSION})"
    rf"|(?P<kind>docrag|agent):(?P<session>{_SESSION})(?:/(?P<suffix>.*))?)\Z", re.DOTALL)
_SUFFIXES = {(kind, fmt.rpartition("/")[2]): stage for (kind, stage), fmt in TRACE_URI_FORMATS.items()
             if kind in ("docrag", "agent") and "/" in fmt and "{i}" not in fmt}
_ANALYSIS = re.compile(r"i([1-9][0-9]*)(?:/(thought|observation))?\Z")
_NUMBERED = re.compile(r"(step|finding)/([1-9][0-9]*)\Z")


def _number(digits: str) -> int | None:
    try:
        return int(digits)
    except ValueError:  # more digits than an int is read from
        return None


def parse_trace_uri(uri: str) -> TraceUri | None:
    """What ``uri`` names in the trace scheme, or ``None`` for a URI the scheme does not name.

    Every stage, edge selection and answer of a trace is named after its session
    (``urn:trustgraph:prov:focus:{uuid}`` belongs to ``urn:trustgraph:question:{uuid}``,
    ``urn:trustgraph:agent:{sid}/i2`` to ``urn:trustgraph:agent:{sid}``), so a URI says which
    trace may own it; retention uses this to keep one trace's deletion out of another's nodes.
    """
    m = _TRACE_NODE.match(uri) if isinstance(uri, str) else None
    if m is None:
        return None
    if m["question"]:
        return TraceUri("graphrag", m["question"], "question")
    if m["stage"]:
        return TraceUri("graphrag", m["stage_session"], m["stage"])
    if m["edge_session"]:
        return TraceUri("graphrag", m["edge_session"], "edge", _number(m["edge"]))
    if m["answer"]:
        return TraceUri("graphrag", m["answer"], "answer")
    kind, session, suffix = m["kind"], m["session"], m["suffix"]
    if suffix is None:
        return TraceUri(kind, session, "question")
    analysis = _ANALYSIS.match(suffix) if kind == "agent" else None
    if analysis:
        return TraceUri(kind, session, analysis[2] or "analysis", _number(analysis[1]))
    numbered = _NUMBERED.match(suffix) if kind == "agent" else None
    if numbered:
        return TraceUri(kind, session, numbered[1], _number(numbered[2]))
    return TraceUri(kind, session, _SUFFIXES.get((kind, suffix), ""))


def trace_root_of(uri: str) -> str:
    """The Question URI of the trace ``uri`` is named after (itself for a Question), or ``""``."""
    trace = parse_trace_uri(uri)
    return trace.question if trace else ""


def answer_uri_of(question: str) -> str:
    """The librarian id the answer of Question ``question`` is stored under, or ``""`` for a URI of no scheme."""
    trace = parse_trace_uri(question)
    return trace.stage_uri("answer") if trace and trace.stage == "question" else ""


def document_owner(document: str) -> str:
    """The Question of the trace that stores librarian document ``document`` by the URI scheme, or ``""``.

    A trace's own documents are its answer and, for an agent, the texts of its thoughts and
    observations (:data:`DOCUMENT_STAGES`); any other document a trace points at is someone else's.
    """
    trace = parse_trace_uri(document)
    return trace.question if trace and trace.stage in DOCUMENT_STAGES else ""


def final_stage_uris(question: str) -> tuple[str, str]:
    """``(final stage, error stage)`` URIs of the trace rooted at Question ``question`` (``""`` for another URI).

    A trace is finished when one of them is stored.
    """
    trace = parse_trace_uri(question)
    if trace is None or trace.stage != "question":
        return "", ""
    return trace.stage_uri(FINAL_STAGES[trace.kind]), trace.stage_uri("error")


#: Ids of GraphRAG and DocumentRAG queries as the services make them (uuids).
_QUERY_ID = re.compile(r"[0-9A-Za-z\-]{1,128}\Z")


def check_question_uri(uri: str) -> TraceUri:
    """``uri`` read back, if it is a Question URI whose id is one the services make, else ValueError.

    Query ids are uuids and agent session ids pass :func:`check_session_id`, so such a URI is
    short and plain enough to echo whole.
    """
    trace = parse_trace_uri(uri)
    if trace is None or trace.stage != "question" or not (
            _SESSION_ID.match(trace.session) if trace.kind == "agent" else _QUERY_ID.match(trace.session)):
        raise ValueError(f"not a Question URI: {str(uri)[:80]!r}")
    return trace
