"""Serialise triples as Turtle, TriG, N-Quads or N-Triples (RDF 1.2), and parse them back.

pyoxigraph does the writing and reading, so escaping is never hand-made: any text in a
literal (quotes, newlines, ``"> ; <x> <y> <z> .``) comes back exactly as it went in.  Triple
terms are written in RDF 1.2 syntax ``<<( s p o )>>``; they may only be objects (a triple
term as subject raises :class:`TermError`).

Turtle and N-Triples hold one graph.  Triples that all sit in one graph (named or default)
are written without the graph name (``parse(..., graph=...)`` puts it back); triples from
several graphs are refused unless ``drop_graphs=True`` explicitly merges them.  TriG and
N-Quads keep every graph.

### Usage example

>>> from trustgraph_base.schema import iri, literal, Triple
>>> ts = [Triple(iri("https://trustgraph.ai/ns/a"), iri("http://www.w3.org/2000/01/rdf-schema#label"),
...              literal("A"), "urn:graph:retrieval")]
>>> text = serialize(ts, "trig")
>>> parse(text, "trig") == ts
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import BinaryIO

import pyoxigraph as ox

from ..provenance import namespaces as ns
from ..schema.primitives import Triple
from .oxigraph import from_quad, to_oxigraph_triple, to_quad
from .terms import validate_iri

__all__ = ["DEFAULT_PREFIXES", "FORMATS", "ExportError", "RdfParseError", "serialize", "parse"]

#: Prefixes written into Turtle and TriG unless the caller passes their own.
DEFAULT_PREFIXES: dict[str, str] = {
    "tg": ns.TG_NS, "prov": ns.PROV, "rdf": ns.RDF, "rdfs": ns.RDFS,
    "xsd": ns.XSD, "dc": ns.DC, "skos": ns.SKOS,
}

#: Accepted format names (and aliases) -> (pyoxigraph format, holds several graphs).
FORMATS: dict[str, tuple[ox.RdfFormat, bool]] = {
    "turtle": (ox.RdfFormat.TURTLE, False), "ttl": (ox.RdfFormat.TURTLE, False),
    "ntriples": (ox.RdfFormat.N_TRIPLES, False), "n-triples": (ox.RdfFormat.N_TRIPLES, False),
    "nt": (ox.RdfFormat.N_TRIPLES, False),
    "trig": (ox.RdfFormat.TRIG, True),
    "nquads": (ox.RdfFormat.N_QUADS, True), "n-quads": (ox.RdfFormat.N_QUADS, True),
    "nq": (ox.RdfFormat.N_QUADS, True),
}


class ExportError(ValueError):
    """The triples cannot be written in the requested format (unknown format, several graphs in Turtle)."""


class RdfParseError(ValueError):
    """The text is not valid in the stated RDF format."""


def _format(name: str) -> tuple[ox.RdfFormat, bool]:
    try:
        return FORMATS[name.lower()]
    except (KeyError, AttributeError):
        raise ExportError(f"unknown RDF format {name!r}; use one of: turtle, trig, nquads, ntriples") from None


def serialize(triples: Iterable[Triple], format: str = "turtle", prefixes: Mapping[str, str] | None = None, *,
              drop_graphs: bool = False) -> str:
    """Write triples in an RDF 1.2 format.

    :param triples: the triples, in the order they should appear.
    :param format: ``turtle``, ``trig``, ``nquads`` or ``ntriples`` (aliases ``ttl``, ``nq``, ``nt``).
    :param prefixes: prefix -> namespace for Turtle/TriG; ``None`` uses :data:`DEFAULT_PREFIXES`
        (tg, prov, rdf, rdfs, xsd, dc, skos); pass ``{}`` for none.
    :param drop_graphs: for Turtle/N-Triples only: merge triples from several graphs into one,
        losing their graph names.  Without it several graphs raise :class:`ExportError`.
    :returns: the document text.
    :raises TermError: for an invalid term or a triple term in subject position.
    :raises ExportError: for an unknown format or several graphs in a single-graph format.
    """
    fmt, datasets = _format(format)
    triples = list(triples)
    items: list[ox.Quad] | list[ox.Triple]
    if datasets:
        items = [to_quad(t) for t in triples]
    else:
        graphs = {t.g for t in triples}
        if len(graphs) > 1 and not drop_graphs:
            names = ", ".join(sorted(g or "(default graph)" for g in graphs))
            raise ExportError(f"{format} holds a single graph but the triples are in {len(graphs)} graphs "
                              f"({names}); use 'trig' or 'nquads' to keep them, or pass drop_graphs=True "
                              f"to merge them into one graph")
        for g in graphs:
            if g:
                validate_iri(g)
        items = [to_oxigraph_triple(t) for t in triples]
    use_prefixes = dict(DEFAULT_PREFIXES if prefixes is None else prefixes)
    if fmt in (ox.RdfFormat.N_TRIPLES, ox.RdfFormat.N_QUADS):
        use_prefixes = {}
    try:
        data = ox.serialize(items, format=fmt, prefixes=use_prefixes or None)
    except (ValueError, TypeError) as e:
        raise ExportError(f"cannot write {format}: {e}") from None
    if data is None:  # pyoxigraph returns the bytes when no output file is given
        raise ExportError(f"cannot write {format}: pyoxigraph returned nothing")
    return data.decode("utf-8")


def parse(text: str | bytes | BinaryIO, format: str = "turtle", *, graph: str = "") -> list[Triple]:
    """Read an RDF document into triples, in document order.

    :param text: the document, or a binary file to read it from as it is parsed.
    :param format: as for :func:`serialize`.
    :param graph: the graph to put default-graph triples in (e.g. the graph a Turtle file was
        exported from); ``""`` keeps them in the default graph.
    :raises RdfParseError: for a syntax error (the message carries pyoxigraph's position).
    :raises TermError: for content a :class:`Triple` cannot hold (directional literals,
        blank-node graph names, triple terms nested too deep).
    """
    fmt, _ = _format(format)
    if graph:
        validate_iri(graph)
    try:
        quads = list(ox.parse(text, format=fmt))
    except SyntaxError as e:
        raise RdfParseError(f"invalid {format}: {e}") from None
    out = []
    for q in quads:
        t = from_quad(q)
        if graph and not t.g:
            t.g = graph
        out.append(t)
    return out

