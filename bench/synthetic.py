"""A deterministic synthetic knowledge graph for the GraphRAG benchmarks.

Shape (like the graph behind the graph-rag anchors in bench/README.md): ``entities`` nodes with an ``rdfs:label``
each, ``edges`` edges over 40 labelled predicates (one in ten with a literal object), and
extraction provenance for every edge in ``urn:graph:source`` made by the real builders:
10 edges per chunk subgraph (``tg:contains <<( s p o )>>``), 4 chunks per page, 10 pages per
document, so every edge has a source chain subgraph → chunk → page → document.

Labels are two or three real words ("Amber Falcon", "Amber Falcon of Lyon"), unique per
entity, so questions that name them find them by vector search.  Entity vectors carry the
real model id of the local embedder; :func:`entity_vectors` embeds the labels of the
entities the questions are about with the real embedder and gives the others deterministic
random unit vectors (cheap, and far from any real sentence embedding), unless asked to
embed every label.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance.triples import chunk_triples, document_triples, page_triples, subgraph_triples
from trustgraph_base.schema import Term, Triple, iri, literal
from trustgraph_base.store.vectors import VectorItem

__all__ = ["SyntheticGraph", "Question", "graph_for_triples", "entity_vectors", "insert_graph"]

BASE = "http://bench.trustgraph.ai/"
EDGES_PER_CHUNK = 10
CHUNKS_PER_PAGE = 4
PAGES_PER_DOCUMENT = 10
#: Triples per entity of the synthetic graph at the default density (5 edges per entity), used
#: to size a graph for a target triple count.
TRIPLES_PER_ENTITY = 16.7

_ADJ = ("amber azure bold brave bright calm clever coral crimson dusky eager early emerald fair fierce gentle "
        "golden grand green grey hidden humble icy ivory jade jolly keen lively lone lucky lunar misty modest "
        "noble north olive pale proud quiet rapid red rosy royal ruby rustic sable scarlet silent silver slate "
        "sleek snowy solar south spry steady stern stone storm sunny swift tawny tidal timber topaz twilight "
        "upper velvet violet vivid warm west white wild windy winter wise young zesty autumn cobalt copper "
        "desert distant hollow iron marble meadow midnight ocean pearl river saffron").split()
_NOUN = ("falcon heron otter badger lynx raven cedar maple willow birch harbor canyon glacier meadow prairie "
         "summit valley beacon lantern compass anchor arrow bridge castle citadel forge garden grove haven "
         "island journal kettle ledger mill orchard palace quarry rampart sentinel spire tower vault wharf "
         "academy archive atelier bakery brewery chapel clinic college company council foundry gallery "
         "guild institute laboratory library market museum observatory press school society studio theatre "
         "university workshop alliance bureau cartel collective consortium cooperative federation league "
         "ministry mission network order orchestra parliament partnership syndicate tribunal union venture "
         "circle club college fleet").split()
_PLACE = ("Lyon Oslo Porto Quito Riga Turin Zagreb Cork Ghent Bergen Split Graz Malmo Tartu Bruges Cadiz Delft "
          "Evora Faro Genoa Hanoi Izmir Jena Kyoto Lagos Lille Luxor Mainz Nice Nara Perth Pisa Pula Reims Sochi "
          "Tours Trier Ulm Vaduz Varna Wells York Zug Aalen Basel Como Dijon Essen Fulda Gouda").split()
_PREDICATES = ("works with", "is located in", "was founded by", "collaborates with", "supplies", "owns",
               "is part of", "competes with", "funds", "studied at", "employs", "was inspired by", "advises",
               "is a member of", "publishes", "trades with", "borders", "is named after", "succeeded",
               "mentored", "rivals", "acquired", "is allied with", "hosts", "sponsors", "was built by",
               "teaches at", "reports to", "was renamed to", "is sister city of", "imports from", "exports to",
               "maintains", "designed", "restored", "governs", "documents", "celebrates", "protects", "visited")
_LITERAL_PREDICATES = ("was founded in", "has population", "has motto")


def _unique_words() -> tuple[list[str], list[str]]:
    adj = list(dict.fromkeys(_ADJ))
    noun = list(dict.fromkeys(_NOUN))
    return adj, noun


@dataclass(frozen=True)
class Question:
    """A benchmark question and the entities it names (their labels are embedded for real)."""

    text: str
    entities: tuple[int, ...]


@dataclass
class SyntheticGraph:
    """The graph; everything is a pure function of ``entities``, ``edges`` and ``seed``.

    :param entities: number of entity nodes.
    :param edges: number of distinct edges (default graph).
    :param seed: random seed.
    """

    entities: int
    edges: int
    seed: int = 11
    _edge_list: list[tuple[int, int, int | str]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        rnd = random.Random(self.seed)
        seen: set[tuple] = set()
        n, out = self.entities, self._edge_list
        while len(out) < self.edges:
            s = rnd.randrange(n)
            if rnd.random() < 0.1:
                k = rnd.randrange(len(_LITERAL_PREDICATES))
                o: int | str = (str(1800 + rnd.randrange(220)) if k == 0 else
                                str(1000 * rnd.randrange(1, 900)) if k == 1 else f"motto {rnd.randrange(10**6)}")
                p = -1 - k
            else:
                p, o = rnd.randrange(len(_PREDICATES)), rnd.randrange(n)
                if o == s:
                    continue
            key = (s, p, o)
            if key not in seen:
                seen.add(key)
                out.append(key)

    # ---------------------------------------------------------------- terms
    def entity(self, i: int) -> Term:
        return iri(f"{BASE}e/{i}")

    def label(self, i: int) -> str:
        adj, noun = _unique_words()
        a, rest = i % len(adj), i // len(adj)
        b, rest = rest % len(noun), rest // len(noun)
        name = f"{adj[a].capitalize()} {noun[b].capitalize()}"
        if rest == 0:
            return name
        rest -= 1
        if rest < len(_PLACE):
            return f"{name} of {_PLACE[rest]}"
        return f"{name} of {_PLACE[rest % len(_PLACE)]} {rest // len(_PLACE) + 1}"

    def predicate(self, k: int) -> Term:
        return iri(f"{BASE}p/{k}") if k >= 0 else iri(f"{BASE}p/lit{-1 - k}")

    def predicate_label(self, k: int) -> str:
        return _PREDICATES[k] if k >= 0 else _LITERAL_PREDICATES[-1 - k]

    def edge(self, j: int) -> Triple:
        s, p, o = self._edge_list[j]
        obj = self.entity(o) if isinstance(o, int) else literal(o)
        return Triple(self.entity(s), self.predicate(p), obj)

    # ---------------------------------------------------------------- structure
    @cached_property
    def degree(self) -> list[int]:
        d = [0] * self.entities
        for s, _p, o in self._edge_list:
            d[s] += 1
            if isinstance(o, int):
                d[o] += 1
        return d

    def questions(self, count: int) -> list[Question]:
        """``count`` questions about well-connected entities, each naming one or two of them."""
        rnd = random.Random(self.seed + 1)
        ranked = sorted(range(self.entities), key=lambda i: (-self.degree[i], i))
        pool = ranked[: max(count * 4, 8)]
        rnd.shuffle(pool)
        out = []
        for q in range(count):
            a, b = pool[2 * q % len(pool)], pool[(2 * q + 1) % len(pool)]
            if q % 2 == 0:
                out.append(Question(f"What is {self.label(a)} connected to, and who works with it?", (a,)))
            else:
                out.append(Question(f"How are {self.label(a)} and {self.label(b)} related?", (a, b)))
        return out

    # ---------------------------------------------------------------- triples
    def triple_batches(self, batch: int = 5000) -> Iterator[list[Triple]]:
        """Every triple of the graph (labels, edges, extraction provenance), in batches."""
        label = iri(ns.RDFS_LABEL)
        buf: list[Triple] = []
        for k in range(len(_PREDICATES)):
            buf.append(Triple(self.predicate(k), label, literal(_PREDICATES[k])))
        for k in range(len(_LITERAL_PREDICATES)):
            buf.append(Triple(self.predicate(-1 - k), label, literal(_LITERAL_PREDICATES[k])))
        for i in range(self.entities):
            buf.append(Triple(self.entity(i), label, literal(self.label(i))))
            if len(buf) >= batch:
                yield buf
                buf = []
        chunks_per_doc = CHUNKS_PER_PAGE * PAGES_PER_DOCUMENT
        for c0 in range(0, len(self._edge_list), EDGES_PER_CHUNK):
            c = c0 // EDGES_PER_CHUNK
            d, within = divmod(c, chunks_per_doc)
            page_no, chunk_no = divmod(within, CHUNKS_PER_PAGE)
            doc = f"{BASE}doc/{d}"
            page = f"{doc}/page/{page_no + 1}"
            chunk = f"{page}/chunk/{chunk_no}"
            if within == 0:
                buf += document_triples(doc, f"Synthetic report {d}", "text/plain", PAGES_PER_DOCUMENT)
            if chunk_no == 0:
                buf += page_triples(page, doc, page_no + 1)
            edges = [self.edge(j) for j in range(c0, min(c0 + EDGES_PER_CHUNK, len(self._edge_list)))]
            buf += edges
            buf += chunk_triples(chunk, page, chunk_no, chunk_no * 1000, 1000)
            buf += subgraph_triples(f"{chunk}/subgraph", chunk, edges)
            if len(buf) >= batch:
                yield buf
                buf = []
        if buf:
            yield buf

    def triple_count(self) -> int:
        return sum(len(b) for b in self.triple_batches())


def graph_for_triples(triples: int, seed: int = 11) -> SyntheticGraph:
    """A graph of about ``triples`` triples at the anchor graph's density (5 edges per entity)."""
    entities = max(50, round(triples / TRIPLES_PER_ENTITY))
    return SyntheticGraph(entities, 5 * entities, seed)


def random_unit_vectors(ids: list[int], dim: int, seed: int) -> np.ndarray:
    """Deterministic random unit vectors, one per id (float32)."""
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((len(ids), dim), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


_VECTOR_CACHE: dict[tuple, list[list[VectorItem]]] = {}


def entity_vectors(graph: SyntheticGraph, embedder, real: set[int] | None = None,
                   limit: int | None = None) -> list[list[VectorItem]]:
    """Vector items for the graph index, in batches of 1,000 (computed once per process and graph).

    :param embedder: the real local embedder (its vectors for ``real`` entities' labels).
    :param real: entities embedded for real; ``None`` = every entity (slow: ~100 labels/s).
    :param limit: give vectors only to the first ``limit`` entities (plus every ``real`` one), so
        the vector index can stay one size while the triple store grows.
    """
    key = (graph.entities, graph.edges, graph.seed, None if real is None else frozenset(real), limit)
    if key in _VECTOR_CACHE:
        return _VECTOR_CACHE[key]
    dim = embedder.dimension
    ids = list(range(graph.entities if limit is None else min(limit, graph.entities)))
    if real is not None:
        ids = sorted(set(ids) | real)
    batches = []
    for k in range(0, len(ids), 1000):
        part = ids[k:k + 1000]
        embed_these = part if real is None else [i for i in part if i in real]
        vectors = dict(zip(embed_these, np.asarray(embedder.embed([graph.label(i) for i in embed_these]),
                                                   dtype=np.float32), strict=True)) if embed_these else {}
        rand = random_unit_vectors(part, dim, graph.seed * 1_000_003 + k)
        batches.append([VectorItem(graph.entity(i).value, vectors.get(i, rand[n]), label=graph.label(i))
                        for n, i in enumerate(part)])
    _VECTOR_CACHE.clear()  # one graph's vectors at a time: the scaling graphs are large
    _VECTOR_CACHE[key] = batches
    return batches


def insert_graph(graph: SyntheticGraph, triples_store, vector_index, user: str, collection: str, embedder,
                 real: set[int] | None, vector_limit: int | None = None) -> dict[str, float]:
    """Load the graph's triples and entity vectors; returns counts and seconds spent."""
    import time

    from trustgraph_flow.model.embeddings import LOCAL_MODEL_ID

    t0 = time.perf_counter()
    n = 0
    for batch in graph.triple_batches():
        n += triples_store.insert(user, collection, batch)
    t1 = time.perf_counter()
    v = 0
    for items in entity_vectors(graph, embedder, real, vector_limit):
        v += vector_index.upsert(user, collection, LOCAL_MODEL_ID, items)
    t2 = time.perf_counter()
    return {"triples": n, "triple_seconds": t1 - t0, "vectors": v, "vector_seconds": t2 - t1}
