"""RDF terms and quads: TrustGraph wire JSON <-> :class:`Term` / :class:`Triple`.

TrustGraph keys a term by type: ``{"t":"i","i":iri}``, ``{"t":"l","v":text,"dt":datatype,"ln":lang}``,
``{"t":"b","d":id}``, ``{"t":"t","tr":{"s":…,"p":…,"o":…}}``.  A quad's ``g`` is left out for
the default graph, which this project writes as ``""``.  Both directions are exact: datatype,
language and nested triple terms survive a round trip (see ``docs/gateway.md``).
"""

from __future__ import annotations

from typing import Any

from trustgraph_base.rdf.terms import quoted, spo
from trustgraph_base.schema import BLANK, IRI, LITERAL, TRIPLE, Term, Triple

from .wire import GatewayRequestError

#: Deepest nesting of triple terms accepted from a client (``<<( <<( … )>> p o )>>``).
MAX_TERM_DEPTH = 8
#: Longest IRI, literal or blank node id accepted from a client (characters).
MAX_TERM_LENGTH = 100_000


def _text(data: dict, key: str, what: str, required: bool = False) -> str:
    value = data.get(key, "")
    if type(value) is not str:
        raise GatewayRequestError(f"{what}: '{key}' must be a string, got {type(value).__name__}")
    if required and not value:
        raise GatewayRequestError(f"{what}: '{key}' must not be empty")
    if len(value) > MAX_TERM_LENGTH:
        raise GatewayRequestError(f"{what}: '{key}' is longer than {MAX_TERM_LENGTH} characters")
    return value


def term_from_wire(data: Any, what: str = "term", depth: int = 0) -> Term:
    """A :class:`Term` from TrustGraph's JSON; :class:`GatewayRequestError` saying what is wrong."""
    if type(data) is not dict:
        raise GatewayRequestError(f"{what} must be an object like {{\"t\": \"i\", \"i\": \"http://…\"}}")
    kind = data.get("t")
    if kind == IRI:
        return Term(IRI, _text(data, "i", what, required=True))
    if kind == LITERAL:
        return Term(LITERAL, _text(data, "v", what), _text(data, "dt", what), _text(data, "ln", what))
    if kind == BLANK:
        return Term(BLANK, _text(data, "d", what, required=True))
    if kind == TRIPLE:
        if depth >= MAX_TERM_DEPTH:
            raise GatewayRequestError(f"{what}: triple terms nested deeper than {MAX_TERM_DEPTH}")
        inner = data.get("tr")
        if type(inner) is not dict:
            raise GatewayRequestError(f"{what}: a triple term needs 'tr' with 's', 'p' and 'o'")
        s, p, o = (term_from_wire(inner.get(k), f"{what}.tr.{k}", depth + 1) for k in ("s", "p", "o"))
        return Term(TRIPLE, triple=Triple(s, p, o))
    raise GatewayRequestError(f"{what}: 't' must be one of 'i', 'l', 'b', 't', got {str(kind)[:20]!r}")


def term_to_wire(term: Term) -> dict:
    """TrustGraph's JSON of ``term`` (a literal's ``dt``/``ln`` only when set)."""
    if term.type == IRI:
        return {"t": IRI, "i": term.value}
    if term.type == LITERAL:
        out = {"t": LITERAL, "v": term.value}
        if term.datatype:
            out["dt"] = term.datatype
        if term.language:
            out["ln"] = term.language
        return out
    if term.type == BLANK:
        return {"t": BLANK, "d": term.value}
    s, p, o = spo(quoted(term))
    return {"t": TRIPLE, "tr": {"s": term_to_wire(s), "p": term_to_wire(p), "o": term_to_wire(o)}}


def quad_to_wire(triple: Triple) -> dict:
    """A quad as TrustGraph sends it: ``g`` left out for the default graph."""
    s, p, o = spo(triple)
    out: dict[str, Any] = {"s": term_to_wire(s), "p": term_to_wire(p), "o": term_to_wire(o)}
    if triple.g:
        out["g"] = triple.g
    return out


def quad_from_wire(data: Any, what: str = "triple") -> Triple:
    """A :class:`Triple` from TrustGraph's quad JSON (``g`` absent = the default graph ``""``)."""
    if type(data) is not dict:
        raise GatewayRequestError(f"{what} must be an object with 's', 'p' and 'o'")
    g = data.get("g", "")
    if type(g) is not str:
        raise GatewayRequestError(f"{what}: 'g' must be a string")
    s, p, o = (term_from_wire(data.get(k), f"{what}.{k}") for k in ("s", "p", "o"))
    return Triple(s, p, o, g)
