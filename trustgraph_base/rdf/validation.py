"""Check that an explain trace is well formed, with the SHACL shapes shipped in ``shapes/trace.ttl``.

pyshacl works on rdflib graphs and rdflib 7 cannot hold RDF 1.2 triple terms, so the trace is
validated on a copy in which each triple term ``<<( s p o )>>`` becomes the node
``urn:triple:<sha256 of its canonical string>``, typed ``tg:QuotedTriple`` and described with
``rdf:subject`` / ``rdf:predicate`` / ``rdf:object``.  The shapes can then require "exactly one
triple term per edge selection".  All graphs of the input are validated as one.

Violations come back as readable sentences ("Edge selection urn:trustgraph:prov:edge:q1:3 has
no tg:edge triple term"), with triple-term nodes shown as ``<<( s p o )>>`` again.

rdflib and pyshacl are imported on first use: importing :mod:`trustgraph_base.rdf` (which every
service does for canonical terms) must not cost the second it takes to load pyshacl.

### Usage example

>>> from trustgraph_base.provenance import question_triples
>>> report = validate_trace(question_triples("urn:trustgraph:question:q1", "Who?", "2025-01-01T00:00:00Z"))
>>> report.conforms, report.violations
(True, [])
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ..provenance import namespaces as ns
from ..schema.primitives import BLANK, IRI, LITERAL, TRIPLE, Term, Triple
from .terms import TermError, quoted, serialize_term, spo, validate_triple

if TYPE_CHECKING:
    from rdflib import Graph, URIRef

__all__ = ["TG_QUOTED_TRIPLE", "Violation", "ValidationReport", "validate_trace", "to_rdflib_graph",
           "load_shapes"]

#: Class of the nodes that stand for triple terms in the rdflib copy (never exported).
TG_QUOTED_TRIPLE = ns.TG_NS + "QuotedTriple"
_QUOTED_PREFIX = "urn:triple:"
#: Named shapes of trace.ttl give their local name to :attr:`Violation.constraint`.
_TGSH = "https://trustgraph.ai/shapes/trace#"
_IN_TRACE_RULES = {"DerivedFromInTrace", "GeneratedByInTrace", "SelectedEdgeInTrace"}

_PREFIXES = {ns.TG_NS: "tg:", ns.PROV: "prov:", ns.RDF: "rdf:", ns.RDFS: "rdfs:", ns.XSD: "xsd:",
             ns.DC: "dc:", ns.SKOS: "skos:"}
_LOCAL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")

#: Most specific first: the word used for a node in messages.
_KINDS = [
    (ns.TG_GRAPH_RAG_QUESTION, "GraphRAG question"), (ns.TG_DOC_RAG_QUESTION, "DocumentRAG question"),
    (ns.TG_AGENT_QUESTION, "Agent question"), (ns.TG_QUESTION, "Question"), (ns.TG_GROUNDING, "Grounding"),
    (ns.TG_EXPLORATION, "Exploration"), (ns.TG_FOCUS, "Focus"), (ns.TG_EDGE_SELECTION, "Edge selection"),
    (ns.TG_SYNTHESIS, "Synthesis"), (ns.TG_ANALYSIS, "Analysis"), (ns.TG_THOUGHT_TYPE, "Thought"),
    (ns.TG_OBSERVATION_TYPE, "Observation"), (ns.TG_CONCLUSION, "Conclusion"),
    (ns.TG_ERROR, "Error"), (TG_QUOTED_TRIPLE, "Triple term"),
]


@dataclass(frozen=True)
class Violation:
    """One problem in a trace.

    :param focus: the node that breaks a rule (IRI, or ``<<( s p o )>>`` for a triple term).
    :param path: the property involved, prefixed (``tg:edge``; ``^tg:selectedEdge`` for an inverse link).
    :param message: a sentence naming the node and the problem.
    :param value: the offending value, when there is one.
    :param constraint: the rule that failed: a named shape of trace.ttl (``DerivedFromInTrace``,
        ``ReachesQuestion``, ...), a SHACL component (``MinCount``, ``Class``, ...) or ``Term``.
    """

    focus: str
    path: str
    message: str
    value: str = ""
    constraint: str = ""

    def __str__(self) -> str:
        return self.message


@dataclass
class ValidationReport:
    """The outcome of :func:`validate_trace`: ``conforms`` is true exactly when there are no violations."""

    conforms: bool
    violations: list[Violation] = field(default_factory=list)

    def text(self) -> str:
        """All violations, one per line (or ``"trace conforms"``)."""
        if self.conforms:
            return "trace conforms"
        return "\n".join(v.message for v in self.violations)


@lru_cache(maxsize=1)
def _lib() -> SimpleNamespace:
    """rdflib and pyshacl, imported once, on first use."""
    import pyshacl
    from rdflib import BNode, Graph, Literal, URIRef
    from rdflib.collection import Collection
    from rdflib.namespace import RDF, RDFS, SH

    return SimpleNamespace(pyshacl=pyshacl, BNode=BNode, Graph=Graph, Literal=Literal, URIRef=URIRef,
                           Collection=Collection, RDF=RDF, RDFS=RDFS, SH=SH)


# ---------------------------------------------------------------- the rdflib copy

class _Copier:
    """Builds the rdflib copy of a trace, remembering which node stands for which triple term."""

    def __init__(self) -> None:
        self.r = _lib()
        self.graph = self.r.Graph()
        self.quoted: dict[Any, str] = {}

    def node(self, term: Term) -> Any:
        r, t = self.r, term.type
        if t == IRI:
            return r.URIRef(term.value)
        if t == LITERAL:
            if term.language:
                return r.Literal(term.value, lang=term.language)
            if term.datatype and term.datatype != ns.XSD_STRING:
                return r.Literal(term.value, datatype=r.URIRef(term.datatype))
            return r.Literal(term.value)
        if t == BLANK:
            return r.BNode(term.value)
        if t == TRIPLE:
            canonical = serialize_term(term)
            node = r.URIRef(_QUOTED_PREFIX + hashlib.sha256(canonical.encode("utf-8")).hexdigest())
            if node not in self.quoted:
                self.quoted[node] = canonical
                (s, p, o), add = spo(quoted(term)), self.graph.add
                add((node, r.RDF.type, r.URIRef(TG_QUOTED_TRIPLE)))
                add((node, r.RDF.subject, self.node(s)))
                add((node, r.RDF.predicate, self.node(p)))
                add((node, r.RDF.object, self.node(o)))
            return node
        raise TermError(f"unknown term type {t!r}")

    def add(self, triple: Triple) -> None:
        s, p, o = spo(triple)
        self.graph.add((self.node(s), self.node(p), self.node(o)))


def to_rdflib_graph(triples: Iterable[Triple]) -> tuple[Graph, dict[URIRef, str]]:
    """The rdflib copy of a trace (all graphs merged) and the map node -> canonical triple term.

    :param triples: the trace; terms must be valid (see :func:`validate_triple`).
    """
    copier = _Copier()
    with _quiet_rdflib():
        for t in triples:
            copier.add(t)
    return copier.graph, copier.quoted


@lru_cache(maxsize=1)
def load_shapes() -> Graph:
    """The shipped SHACL shapes (parsed once)."""
    text = resources.files("trustgraph_base.rdf").joinpath("shapes/trace.ttl").read_text("utf-8")
    shapes: Graph = _lib().Graph().parse(data=text, format="turtle")
    return shapes


@contextmanager
def _quiet_rdflib() -> Iterator[None]:
    """rdflib logs a traceback for every ill-typed literal; the report names them instead."""
    log = logging.getLogger("rdflib.term")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


# ---------------------------------------------------------------- readable messages

class _Renderer:
    """Turns pyshacl's result nodes into short readable text."""

    def __init__(self, data: Graph, shapes: Graph, quoted: dict[Any, str]):
        self.r = _lib()
        self.data, self.shapes, self.quoted = data, shapes, quoted
        sh = self.r.SH
        self.node_kinds = {sh.IRI: "an IRI", sh.Literal: "a literal", sh.BlankNode: "a blank node",
                           sh.BlankNodeOrIRI: "an IRI or blank node", sh.IRIOrLiteral: "an IRI or literal",
                           sh.BlankNodeOrLiteral: "a blank node or literal"}

    def term(self, node: Any) -> str:
        """IRIs as-is (vocabulary prefixed), triple-term nodes as ``<<( s p o )>>``, literals in N-Triples form."""
        r = self.r
        if node is None:
            return ""
        if isinstance(node, r.URIRef):
            if node in self.quoted:
                return self.quoted[node]
            text = str(node)
            for base, prefix in _PREFIXES.items():
                if text.startswith(base) and _LOCAL_NAME.fullmatch(text, len(base)):
                    return prefix + text[len(base):]
            return text
        if isinstance(node, r.Literal):
            text = serialize_term(Term(LITERAL, str(node), str(node.datatype or ""), node.language or ""))
            if node.datatype is not None and text.endswith(f"^^<{node.datatype}>"):
                text = text[:-len(node.datatype) - 2] + self.term(node.datatype)
            return text
        if isinstance(node, r.BNode):
            inverse = self.shapes.value(node, r.SH.inversePath)
            return "^" + self.term(inverse) if inverse is not None else f"_:{node}"
        return str(node)

    def kind(self, focus: Any, shape: Any) -> str:
        """What the focus node is ("Edge selection"), from its types, else from the shape's label."""
        r = self.r
        types = {str(t) for t in self.data.objects(focus, r.RDF.type)}
        for iri, word in _KINDS:
            if iri in types:
                return word
        node_shape = shape if (shape, r.RDF.type, r.SH.NodeShape) in self.shapes else \
            self.shapes.value(None, r.SH.property, shape)
        label = self.shapes.value(node_shape, r.RDFS.label) if node_shape is not None else None
        return str(label) if label is not None else "Node"

    def generated(self, component: str, shape: Any, kind: str, focus: str, path: str, value: str) -> str:
        """A message for a core constraint whose shape has no ``sh:message``."""
        sh, get = self.r.SH, self.shapes.value
        name = str(get(shape, sh.name) or path)
        if component == "MinCount":
            n = int(get(shape, sh.minCount))
            return f"{kind} {focus} has no {name}" if n == 1 else f"{kind} {focus} has fewer than {n} {name}"
        if component == "MaxCount":
            n = int(get(shape, sh.maxCount))
            return (f"{kind} {focus} has more than one {name}" if n == 1
                    else f"{kind} {focus} has more than {n} {name}")
        if component == "Datatype":
            return (f"{name} of {kind} {focus} is {value}, "
                    f"expected a valid {self.term(get(shape, sh.datatype))} literal")
        if component == "Class":
            return f"{name} of {kind} {focus} is {value}, which is not a {self.term(get(shape, sh['class']))}"
        if component == "Or":
            classes = [self.term(get(alt, sh["class"])) for alt in self.r.Collection(self.shapes, get(shape, sh["or"]))]
            return f"{name} of {kind} {focus} is {value}, which is not a {' or '.join(classes)}"
        if component == "NodeKind":
            expected = self.node_kinds.get(get(shape, sh.nodeKind), "another kind of node")
            return f"{name} of {kind} {focus} is {value}, expected {expected}"
        if component == "HasValue":
            expected = self.term(get(shape, sh.hasValue))
            if path == "rdf:type":
                return f"{kind} {focus} is not typed {expected}"
            return f"{kind} {focus} has no {name} {expected}"
        if component == "MinInclusive":
            return f"{name} of {kind} {focus} is {value}, below the minimum {get(shape, sh.minInclusive)}"
        return f"{kind} {focus} violates {component} on {name}" + (f" (value {value})" if value else "")


# ---------------------------------------------------------------- one report per broken chain

def _parents(data: Graph, node: Any) -> list[Any]:
    """The nodes a stage hangs off: derivation links out, and the Focus selecting an edge selection."""
    r = _lib()
    out = [o for p in (ns.PROV_WAS_DERIVED_FROM, ns.PROV_WAS_GENERATED_BY) for o in data.objects(node, r.URIRef(p))]
    out.extend(data.subjects(r.URIRef(ns.TG_SELECTED_EDGE), node))
    return out


def _reaches(data: Graph, start: Any, target: Any) -> bool:
    seen, todo = set(), [start]
    while todo:
        n = todo.pop()
        if n == target:
            return True
        if n not in seen:
            seen.add(n)
            todo.extend(_parents(data, n))
    return False


def _chain_breaks(data: Graph, violations: list[Violation], nodes: dict[str, Any]) -> list[Violation]:
    """Keep a "does not lead back to a Question" violation only where the chain breaks.

    Everything below a broken link fails the same rule; reporting only nodes whose parents
    do not fail it too (or that sit on a cycle) names the problem once.
    """
    failing = {v.focus for v in violations if v.constraint == "ReachesQuestion"}
    kept = []
    for v in violations:
        if v.constraint == "ReachesQuestion":
            node = nodes[v.focus]
            if any(str(p) in failing and not _reaches(data, p, node) for p in _parents(data, node)):
                continue
        kept.append(v)
    return kept


# ---------------------------------------------------------------- validation

def validate_trace(triples: Iterable[Triple]) -> ValidationReport:
    """Validate a trace (GraphRAG, DocumentRAG, agent, or several) against the shipped shapes.

    Triples with invalid terms are reported as violations and left out of the SHACL run.

    :param triples: the trace's triples, in any graphs.
    :returns: a :class:`ValidationReport`; ``conforms`` is false when any rule is broken.
    """
    r = _lib()
    violations: list[Violation] = []
    copier = _Copier()
    with _quiet_rdflib():
        for t in triples:
            try:
                validate_triple(t)
            except TermError as e:
                subject = t.s.value if t is not None and t.s is not None else ""
                predicate = t.p.value if t is not None and t.p is not None else ""
                violations.append(Violation(subject, predicate, f"invalid triple about {subject or '?'}: {e}",
                                            constraint="Term"))
                continue
            copier.add(t)
        data, shapes = copier.graph, load_shapes()
        _, results, text = r.pyshacl.validate(data, shacl_graph=shapes, inference="none", advanced=False,
                                              allow_warnings=False)
    if not isinstance(results, r.Graph):  # pyshacl could not run the shapes at all
        raise RuntimeError(f"SHACL validation failed to run: {text}")

    sh, render = r.SH, _Renderer(data, shapes, copier.quoted)
    found: list[Violation] = []
    nodes: dict[str, Any] = {}
    for result in results.objects(None, sh.result):  # top-level results, not their sh:detail
        get = results.value
        focus_node, value_node, shape = get(result, sh.focusNode), get(result, sh.value), get(result, sh.sourceShape)
        component = str(get(result, sh.sourceConstraintComponent) or "").rsplit("#", 1)[-1]
        component = component.removesuffix("ConstraintComponent")
        rule = str(shape)[len(_TGSH):] if isinstance(shape, r.URIRef) and str(shape).startswith(_TGSH) else component
        path_node = get(result, sh.resultPath)
        if path_node is None and shape is not None:
            path_node = shapes.value(shape, sh.path)
        focus, value, path = render.term(focus_node), render.term(value_node), render.term(path_node)
        nodes[focus] = focus_node
        kind = render.kind(focus_node, shape)
        template = shapes.value(shape, sh.message)
        if template is not None:
            message = (str(template).replace("{kind}", kind).replace("{focus}", focus)
                       .replace("{value}", value).replace("{path}", path))
        else:
            message = render.generated(component, shape, kind, focus, path, value)
        found.append(Violation(focus, path, message, value, rule))
    # A link to a node missing from the trace also fails that link's type rule; the
    # "not in the trace" message says it better, so keep only that one.
    dangling = {(v.focus, v.value) for v in found if v.constraint in _IN_TRACE_RULES}
    found = [v for v in found if v.constraint not in ("Class", "Or") or (v.focus, v.value) not in dangling]
    found = _chain_breaks(data, found, nodes)
    violations.extend(sorted(set(found), key=lambda v: (v.focus, v.path, v.message)))
    return ValidationReport(conforms=not violations, violations=violations)
