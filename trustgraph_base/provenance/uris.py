"""URI generators for every entity of a trace and of extraction provenance.

Query-time URIs follow DESIGN.md 3.1-3.3 exactly.  Extraction URIs for pages and chunks
are derived deterministically (UUID v5) from the document and position, so re-loading the
same document yields the same URIs and idempotent writes.
"""

from __future__ import annotations

import re
import uuid
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


# ---------------------------------------------------------------- GraphRAG
def question_uri(session: str) -> str:
    return f"urn:trustgraph:question:{session}"


def exploration_uri(session: str) -> str:
    return f"urn:trustgraph:prov:exploration:{session}"


def focus_uri(session: str) -> str:
    return f"urn:trustgraph:prov:focus:{session}"


def edge_selection_uri(session: str, index: int) -> str:
    """The i-th (0-based) edge selection of a focus."""
    return f"urn:trustgraph:prov:edge:{session}:{index}"


def synthesis_uri(session: str) -> str:
    return f"urn:trustgraph:prov:synthesis:{session}"


def answer_document_uri(session: str) -> str:
    """Librarian id of a GraphRAG answer text."""
    return f"urn:trustgraph:answer:{session}"


def error_uri(session: str) -> str:
    """The Error entity that ends a failed GraphRAG query's trace."""
    return f"urn:trustgraph:prov:error:{session}"


# ---------------------------------------------------------------- DocumentRAG
def docrag_question_uri(session: str) -> str:
    return f"urn:trustgraph:docrag:{session}"


def docrag_exploration_uri(session: str) -> str:
    return f"urn:trustgraph:docrag:{session}/exploration"


def docrag_synthesis_uri(session: str) -> str:
    return f"urn:trustgraph:docrag:{session}/synthesis"


def docrag_answer_uri(session: str) -> str:
    """Librarian id of a DocumentRAG answer text."""
    return f"urn:trustgraph:docrag:{session}/answer"


def docrag_error_uri(session: str) -> str:
    return f"urn:trustgraph:docrag:{session}/error"


# ---------------------------------------------------------------- agent
def agent_session_uri(session_id: str) -> str:
    return f"urn:trustgraph:agent:{check_session_id(session_id)}"


def agent_iteration_uri(session_id: str, n: int) -> str:
    """Analysis ``n`` (1-based) of an agent session."""
    if n < 1:
        raise ValueError("agent iterations are numbered from 1")
    return f"urn:trustgraph:agent:{check_session_id(session_id)}/i{n}"


def agent_final_uri(session_id: str) -> str:
    return f"urn:trustgraph:agent:{check_session_id(session_id)}/final"


def agent_error_uri(session_id: str) -> str:
    """The Error entity that ends a failed agent run's trace."""
    return f"urn:trustgraph:agent:{check_session_id(session_id)}/error"


def agent_answer_uri(session_id: str) -> str:
    """Librarian id of an agent's final answer."""
    return f"urn:trustgraph:agent:{check_session_id(session_id)}/answer"


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


# ---------------------------------------------------------------- which trace a URI belongs to
_SESSION = r"[A-Za-z0-9._\-]+"
_TRACE_NODE = re.compile(
    rf"urn:trustgraph:(?:question:(?P<q>{_SESSION})"
    rf"|prov:(?:exploration|focus|synthesis|error):(?P<stage>{_SESSION})"
    rf"|prov:edge:(?P<edge>{_SESSION}):[0-9]+"
    rf"|answer:(?P<answer>{_SESSION})"
    rf"|(?P<kind>docrag|agent):(?P<sid>{_SESSION})(?:/.*)?)\Z", re.DOTALL)


def trace_root_of(uri: str) -> str:
    """The Question URI of the trace whose URI scheme ``uri`` follows (itself for a Question), or ``""``.

    Every stage, edge selection and answer of a trace is named after its session
    (``urn:trustgraph:prov:focus:{uuid}`` belongs to ``urn:trustgraph:question:{uuid}``,
    ``urn:trustgraph:agent:{sid}/i2`` to ``urn:trustgraph:agent:{sid}``), so a URI says which
    trace may own it; retention uses this to keep one trace's deletion out of another's nodes.
    """
    m = _TRACE_NODE.match(uri) if isinstance(uri, str) else None
    if m is None:
        return ""
    session = m.group("q") or m.group("stage") or m.group("edge") or m.group("answer")
    if session:
        return question_uri(session)
    return f"urn:trustgraph:{m.group('kind')}:{m.group('sid')}"


def answer_uri_of(question: str) -> str:
    """The librarian id the answer of Question ``question`` is stored under, or ``""`` for a URI of no scheme."""
    if trace_root_of(question) != question:
        return ""
    kind, _, session = question.removeprefix("urn:trustgraph:").partition(":")
    if kind == "question":
        return answer_document_uri(session)
    if kind == "docrag":
        return docrag_answer_uri(session)
    return f"{question}/answer"
