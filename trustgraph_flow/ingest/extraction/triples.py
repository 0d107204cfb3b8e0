"""Turn an :class:`Extraction` into knowledge-graph triples, and validate what an LLM extracted.

Entities and predicates get IRIs from :func:`entity_uri` (so the same label always lands on
the same node, whichever chunk or extractor produced it), an ``rdfs:label`` each, and
definitions become ``skos:definition`` literals.  Objects that are not entities become
literals, typed ``xsd:gYear`` or ``xsd:integer`` when they obviously are one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from trustgraph_base.provenance.namespaces import RDFS_LABEL, SKOS_DEFINITION, XSD, XSD_INTEGER
from trustgraph_base.provenance.uris import entity_uri
from trustgraph_base.schema import EntityContext, Term, Triple, iri, literal

from . import Definition, Extraction, Relationship

XSD_GYEAR = XSD + "gYear"

#: Longest label, predicate or definition accepted from an LLM, in characters.
MAX_LABEL_CHARS = 200
MAX_DEFINITION_CHARS = 1000

_YEAR = re.compile(r"1[0-9]{3}|20[0-9]{2}")
_INTEGER = re.compile(r"-?[0-9]{1,18}")
_GROUPED_INTEGER = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class ExtractedEntity:
    """An entity to embed: its IRI, its label and the text that describes it.

    ``context`` is the entity's definition when one was extracted, else its label.
    """

    iri: str
    label: str
    context: str

    def to_entity_context(self) -> EntityContext:
        """The schema message form used on the entity-contexts queue."""
        return EntityContext(entity=iri(self.iri), label=self.label, context=self.context)


@dataclass(slots=True)
class ExtractedGraph:
    """Triples for the default graph, and the entities they mention."""

    triples: list[Triple] = field(default_factory=list)
    entities: list[ExtractedEntity] = field(default_factory=list)


def literal_object(value: str) -> Term:
    """A literal term for a non-entity object, typed when it is obviously a year or an integer.

    :param value: the object text.
    :returns: ``xsd:gYear`` for four-digit years 1000-2099, ``xsd:integer`` for whole
        numbers (thousands separators removed), else a plain literal.
    """
    text = value.strip()
    if _YEAR.fullmatch(text):
        return literal(text, XSD_GYEAR)
    if _INTEGER.fullmatch(text):
        return literal(str(int(text)), XSD_INTEGER)
    if _GROUPED_INTEGER.fullmatch(text):
        return literal(text.replace(",", ""), XSD_INTEGER)
    return literal(text)


def extraction_to_triples(extraction: Extraction) -> ExtractedGraph:
    """Build the triples and entity list of one chunk's extraction.

    Every entity and predicate gets one ``rdfs:label`` triple (the first spelling seen);
    relationships and definitions are deduplicated; self-loops are dropped.

    :param extraction: relationships and definitions from any extractor.
    :returns: the triples (default graph) and the entities to embed, in first-seen order.
    """
    triples: list[Triple] = []
    seen_triples: set[tuple[str, str, str, str]] = set()
    labels: dict[str, str] = {}
    definitions: dict[str, str] = {}
    entity_order: list[str] = []

    def add(s: Term, p: Term, o: Term) -> None:
        key = (s.value, p.value, o.type + o.value, o.datatype)
        if key not in seen_triples:
            seen_triples.add(key)
            triples.append(Triple(s=s, p=p, o=o))

    def node(label: str, *, is_entity: bool = True) -> Term:
        uri = entity_uri(label)
        if uri not in labels:
            labels[uri] = label
            add(iri(uri), iri(RDFS_LABEL), literal(label))
            if is_entity:
                entity_order.append(uri)
        elif is_entity and uri not in entity_order:
            entity_order.append(uri)
        return iri(uri)

    for rel in extraction.relationships:
        subject = node(rel.subject)
        predicate = node(rel.predicate, is_entity=False)
        obj = node(rel.object) if rel.object_entity else literal_object(rel.object)
        if obj.type == subject.type and obj.value == subject.value:
            continue
        add(subject, predicate, obj)
    for item in extraction.definitions:
        subject = node(item.entity)
        definitions.setdefault(subject.value, item.definition)
        add(subject, iri(SKOS_DEFINITION), literal(item.definition))

    entities = [ExtractedEntity(uri, labels[uri], definitions.get(uri, labels[uri])) for uri in entity_order]
    return ExtractedGraph(triples=triples, entities=entities)


def parse_llm_extraction(relationship_objects: Iterable[Any],
                         definition_objects: Iterable[Any] = ()) -> Extraction:
    """Validate the objects an LLM returned for the relationship and definition prompts.

    Relationship objects look like ``{"subject", "predicate", "object", "object-entity"}``
    (``object-entity`` defaults to true; ``object_entity`` is accepted too); definition
    objects like ``{"entity", "definition"}``.  Anything else (not an object, a missing or
    empty or over-long field, a non-boolean ``object-entity``) is skipped and counted in
    :attr:`Extraction.skipped`; duplicates are dropped silently.

    :param relationship_objects: parsed JSON values from the relationships prompt.
    :param definition_objects: parsed JSON values from the definitions prompt.
    :returns: the valid relationships and definitions.
    """
    result = Extraction()
    seen_rel: set[tuple[str, str, str, bool]] = set()
    for item in relationship_objects or ():
        rel = _relationship(item)
        if rel is None:
            result.skipped += 1
            continue
        key = (rel.subject, rel.predicate, rel.object, rel.object_entity)
        if key not in seen_rel:
            seen_rel.add(key)
            result.relationships.append(rel)
    seen_def: set[tuple[str, str]] = set()
    for item in definition_objects or ():
        definition = _definition(item)
        if definition is None:
            result.skipped += 1
            continue
        def_key = (definition.entity, definition.definition)
        if def_key not in seen_def:
            seen_def.add(def_key)
            result.definitions.append(definition)
    return result


def _clean(value: Any, limit: int = MAX_LABEL_CHARS) -> str | None:
    if not isinstance(value, str):
        return None
    text = _SPACE.sub(" ", value).strip()
    if not text or len(text) > limit:
        return None
    return text


def _relationship(item: Any) -> Relationship | None:
    if not isinstance(item, dict):
        return None
    subject = _clean(item.get("subject"))
    predicate = _clean(item.get("predicate"))
    obj = _clean(item.get("object")) if not isinstance(item.get("object"), (int, float)) else None
    if isinstance(item.get("object"), int) and not isinstance(item.get("object"), bool):
        obj = str(item["object"])
    flag = item.get("object-entity", item.get("object_entity", True))
    if subject is None or predicate is None or obj is None or not isinstance(flag, bool):
        return None
    return Relationship(subject, predicate.lower(), obj, flag)


def _definition(item: Any) -> Definition | None:
    if not isinstance(item, dict):
        return None
    entity = _clean(item.get("entity"))
    text = _clean(item.get("definition"), MAX_DEFINITION_CHARS)
    if entity is None or text is None:
        return None
    return Definition(entity, text)
