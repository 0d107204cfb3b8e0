"""What tg-load-turtle checks before it sends anything, and how it cuts a load into messages.

The services dead-letter a message they refuse, and the loader would then wait for progress
that never comes; so every value they would refuse is found here, in the whole file, before
the first message is sent: a refused file stores nothing.  The limits, and where they come from:

- a quad in ``urn:graph:retrieval`` (:data:`~trustgraph_base.provenance.namespaces.GRAPH_RETRIEVAL`):
  that graph holds the explain traces the services record, so loading into it would forge them;
- every term as the triple store validates it (:func:`trustgraph_base.store.triples.prepare_triples`):
  literals of at most :data:`~trustgraph_base.rdf.terms.MAX_LITERAL_LENGTH` characters, IRIs of at
  most :data:`~trustgraph_base.rdf.terms.MAX_IRI_LENGTH`, triple terms nested at most
  :data:`~trustgraph_base.rdf.terms.MAX_TRIPLE_DEPTH` deep;
- every embedded entity as the vector index keeps it (:func:`trustgraph_base.store.vectors.prepare_items`):
  an ``rdfs:label`` of at most :data:`~trustgraph_base.store.vectors.MAX_LABEL_LENGTH` characters
  without control characters (a label with line breaks or tabs is embedded with each run of
  whitespace as one space; the triple keeps the label as written) and an IRI of at most
  :data:`~trustgraph_base.store.vectors.MAX_ID_LENGTH` characters;
- over Pulsar every message at most :data:`~trustgraph_base.pubsub.pulsar.MAX_MESSAGE_BYTES`
  (the broker's 5 MiB limit), through the gateway at most what its frames carry: batches are cut
  by triples (``--batch-size``) and by bytes, and a triple whose message alone would be larger is
  refused.  The in-process bus has no such limit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from trustgraph_base.codec import encode
from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.rdf.terms import MAX_LITERAL_LENGTH, TermError, serialize_term, spo, validate_triple
from trustgraph_base.schema import IRI, LITERAL, EntityContext, EntityContexts, Metadata, Triple, Triples, iri
from trustgraph_base.store.errors import InvalidQuery
from trustgraph_base.store.triples import prepare_triples
from trustgraph_base.store.vectors import MAX_ID_LENGTH, MAX_LABEL_LENGTH, VectorItem, prepare_items

from .terminal_text import clip

__all__ = ["LoadRefused", "LoadPlan", "plan_load", "ENTITY_BATCH"]

#: Entities per ``entity-contexts`` message (the vector writer embeds up to 64 texts at once).
ENTITY_BATCH = 64
#: Bytes a message holds besides its items (metadata, field names, brackets), counted generously.
_ENVELOPE_BYTES = 1024


class LoadRefused(ValueError):
    """The file holds a value the services would refuse; nothing was sent."""


@dataclass
class LoadPlan:
    """The messages of a load: triple batches and entity batches (labelled IRIs to embed)."""

    triple_batches: list[list[Triple]]
    entity_batches: list[list[EntityContext]]

    @property
    def entities(self) -> int:
        return sum(len(b) for b in self.entity_batches)


def plan_load(triples: Sequence[Triple], batch_size: int, max_message_bytes: int | None = None,
              carrier: str = "Pulsar") -> LoadPlan:
    """Check every triple and label of a load and cut it into messages.

    :param triples: the parsed file.
    :param batch_size: most triples in one message.
    :param max_message_bytes: most bytes in one message (``None``: no limit, the in-process bus).
    :param carrier: what carries the messages (``Pulsar``, ``the gateway``), for the size error.
    :raises LoadRefused: naming the first value the services would refuse, and why.
    """
    _check_graphs(triples)
    _check_terms(triples)
    entities = _entities(triples)
    return LoadPlan(_batches(triples, batch_size, max_message_bytes, _triple_bytes, "triple", carrier),
                    _batches(entities, ENTITY_BATCH, max_message_bytes, _entity_bytes, "entity", carrier))


def _check_graphs(triples: Sequence[Triple]) -> None:
    for i, t in enumerate(triples, 1):
        if t.g == ns.GRAPH_RETRIEVAL:
            raise LoadRefused(f"quad {i:,} ({_where(t)}) is in the graph <{ns.GRAPH_RETRIEVAL}>, which holds the "
                              f"explain traces the services record; traces cannot be loaded")


def _check_terms(triples: Sequence[Triple]) -> None:
    try:
        prepare_triples(triples)  # the triple store's own check, fast on valid input
        return
    except InvalidQuery:
        pass
    for t in triples:  # find the refused triple and say why
        for position, term in zip(("subject", "predicate", "object"), spo(t), strict=True):
            if term.type == LITERAL and len(term.value) > MAX_LITERAL_LENGTH:
                raise LoadRefused(f"the {position} of {_where(t)} is a literal of {len(term.value):,} characters; "
                                  f"the store takes literals of at most {MAX_LITERAL_LENGTH:,}")
        try:
            validate_triple(t)
        except TermError as e:
            raise LoadRefused(f"the store refuses {_where(t)}: {e}") from None
    raise LoadRefused("the store refuses a triple of the file")  # prepare_triples found what validate_triple did not


def _entities(triples: Sequence[Triple]) -> list[EntityContext]:
    """The labelled IRIs to embed (the last ``rdfs:label`` of each, in the default graph), checked."""
    labels: dict[str, str] = {}
    for t in triples:
        s, p, o = spo(t)
        if p.value == ns.RDFS_LABEL and s.type == IRI and o.type == LITERAL and not t.g:
            labels[s.value] = o.value
    out = []
    for entity, label in labels.items():
        text = label if label.isprintable() else " ".join(label.split())  # a multi-line label on one line
        where = f"the rdfs:label of <{clip(entity)}>"
        if len(entity) > MAX_ID_LENGTH:
            raise LoadRefused(f"{where} cannot be embedded: the IRI has {len(entity):,} characters; the vector "
                              f"index keys entities of at most {MAX_ID_LENGTH:,}")
        if len(text) > MAX_LABEL_LENGTH:
            raise LoadRefused(f"{where} has {len(text):,} characters; the vector index keeps labels of at most "
                              f"{MAX_LABEL_LENGTH:,}")
        try:
            prepare_items([VectorItem(entity, (1.0,), label=text)])  # the vector index's own check
        except InvalidQuery as e:
            raise LoadRefused(f"{where} cannot be embedded: {e}") from None
        out.append(EntityContext(entity=iri(entity), label=text, context=text))
    return out


def _triple_bytes(t: Triple) -> int:
    return len(encode(Triples(triples=[t])))


def _entity_bytes(e: EntityContext) -> int:
    return len(encode(EntityContexts(entities=[e])))


def _batches(items: Sequence, count: int, max_bytes: int | None, size, what: str, carrier: str) -> list[list]:
    """``items`` in order, cut into lists of at most ``count`` items and (when given) ``max_bytes`` bytes."""
    if max_bytes is None:
        return [list(items[i:i + count]) for i in range(0, len(items), count)]
    batches: list[list] = []
    current: list = []
    used = _ENVELOPE_BYTES
    for item in items:
        n = size(item)
        if _ENVELOPE_BYTES + n > max_bytes:
            shown = _where(item) if isinstance(item, Triple) else f"<{clip(item.entity.value)}>"
            raise LoadRefused(f"the {what} {shown} needs a message of {n:,} bytes ({n / 2 ** 20:.1f} MiB); "
                              f"{carrier[0].upper()}{carrier[1:]} carries messages of at most {max_bytes:,} bytes")
        if current and (len(current) >= count or used + n > max_bytes):
            batches.append(current)
            current, used = [], _ENVELOPE_BYTES
        current.append(item)
        used += n
    if current:
        batches.append(current)
    return batches


def _where(t: Triple) -> str:
    """``<subject> <predicate>`` of a triple, each cut to a readable length."""
    s, p, _ = spo(t)
    return f"{clip(serialize_term(s))} {clip(serialize_term(p))}"


def triples_message(batch: list[Triple], root: str, index: int, user: str, collection: str) -> Triples:
    return Triples(metadata=Metadata(id=f"{root}#{index}", root=root, user=user, collection=collection),
                   triples=batch)


def entities_message(batch: list[EntityContext], root: str, index: int, user: str,
                     collection: str) -> EntityContexts:
    return EntityContexts(metadata=Metadata(id=f"{root}#e{index}", root=root, user=user, collection=collection),
                          chunk_id=f"{root}#e{index}", entities=batch)
