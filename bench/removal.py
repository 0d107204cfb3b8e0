"""Document removal: one document out of a 1,000-document collection, and how the cost grows.

A collection of small documents (a few sentences each, some facts shared between documents,
so removal has edges to keep) is loaded through the real pipeline, untimed.  Then timed, through
the librarian's ``remove-document`` (what ``tg-remove-library-document`` sends): small documents
out of a tenth of the collection, then, once the collection has its full size, small documents
again (the cost does not follow the collection) and a 20 times larger document (it follows the
document).  Each small figure is the median of :data:`SAMPLES` removals.  Beside the times, the
triple-store look-ups each removal made and the rows they returned are counted (the removal's
own store object is wrapped in :class:`~bench.harness.CountingStore`): unlike a time on a shared
machine, they show exactly what grows.  Target: < 2 s embedded.

    python -m bench.removal [--quick] [--json out.json]
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING

from .common import Figure, Results, spread
from .harness import CountingStore, Suite, bench_parser, load_note, report, run_on_suite, settle

if TYPE_CHECKING:
    from trustgraph_base.schema import DocumentRemoval

#: Documents of the collection (quick mode: the distributed stack loads a fifth of them).
DOCUMENTS = 1000
#: Sentences of the large document (about 20 chunks).
LARGE_SENTENCES = 200
#: Small documents removed at each collection size.
SAMPLES = 5


_SYLLABLES = ("ka", "lo", "mi", "ne", "ra", "su", "ti", "vo", "ze", "pa")


def _name(i: int) -> str:
    """A made-up proper name per number (the extractor takes names, not numbers, for entities)."""
    return "".join(_SYLLABLES[int(d)] for d in str(i)).capitalize()


def _small(i: int) -> bytes:
    person, place = f"{_name(i)} Mineva", _name(i % 40 + 7)
    return (f"{person} discovered the mineral {_name(i).lower()}ite. {person} worked in {place}. "
            f"The mineral {_name(i).lower()}ite was named after {person}. Marie Curie discovered polonium.\n").encode()


def _large(tag: str) -> bytes:
    return "".join(f"{_name(i)} {tag} discovered the mineral {_name(i).lower()}{tag.lower()}ite. "
                   f"{_name(i)} {tag} worked in {_name(i % 30 + 3)}. " for i in range(LARGE_SENTENCES)).encode()


def _doc(name: str, content: bytes) -> tuple[str, str, str, bytes]:
    return (f"https://trustgraph.ai/doc/bench-removal-{name}", name, "text/plain", content)


async def _remove(stack, user: str, collection: str, doc_id: str) -> tuple[float, DocumentRemoval | None, int, int]:
    """Remove one source document; ``(seconds, what it removed, triple-store look-ups, rows they returned)``."""
    from trustgraph_base.schema import LibrarianRequest
    from trustgraph_cli.connection import Connection

    librarian = stack.get("librarian")
    counting = librarian.triples = CountingStore(librarian.triples)
    try:
        async with Connection.attach(stack, timeout=600) as conn:
            t0 = time.perf_counter()
            reply = await conn.request("librarian", LibrarianRequest(
                operation="remove-document", user=user, collection=collection, document_id=doc_id,
                document_type="source"))
            return time.perf_counter() - t0, reply.removal, counting.lookups, counting.rows
    finally:
        librarian.triples = counting.inner


async def _remove_small(stack, user: str, collection: str,
                        numbers: range) -> tuple[list[float], DocumentRemoval, set[tuple[int, int]]]:
    """Remove the small documents ``numbers``: their times, the last one's report, the distinct (look-ups, rows)."""
    times: list[float] = []
    costs: set[tuple[int, int]] = set()
    removal: DocumentRemoval | None = None
    for i in numbers:
        seconds, removal, lookups, rows = await _remove(stack, user, collection, _doc(f"d{i}", b"")[0])
        if removal is None or removal.documents != 1 + removal.pages + removal.chunks or not removal.kept_triples:
            raise AssertionError(f"unexpected removal report {removal}")
        times.append(seconds)
        costs.add((lookups, rows))
    if removal is None:
        raise AssertionError("no document was removed")
    return times, removal, costs


def _costs(costs: set) -> str:
    return ", ".join(f"{lookups} look-ups returning {rows} rows" for lookups, rows in sorted(costs))


async def bench(suite: Suite) -> Results:
    from .ingest import load, start_ingest

    results = Results()
    for stack_name in suite.stacks:
        n = DOCUMENTS if stack_name == "embedded" or not suite.quick else DOCUMENTS // 5
        running = await start_ingest(suite, stack_name)
        user, collection = suite.deployment(stack_name).user, "removal"
        try:
            print(f"  removal ({stack_name}): loading {n} documents ...", flush=True)
            await load(running, user, collection, [_doc(f"d{i}", _small(i)) for i in range(n // 10)])
            await settle(running)  # nothing of the load is still being written while removals are timed
            tenth, _, tenth_costs = await _remove_small(running, user, collection, range(SAMPLES))
            await load(running, user, collection, [_doc(f"d{i}", _small(i)) for i in range(n // 10, n)]
                       + [_doc("large", _large("Tirasu"))])
            await settle(running)
            full, removal, full_costs = await _remove_small(running, user, collection,
                                                            range(n // 10, n // 10 + SAMPLES))
            large, big, large_lookups, large_rows = await _remove(running, user, collection, _doc("large", b"")[0])
            if big is None:
                raise AssertionError("no removal report for the large document")
            small, small_tenth = statistics.median(full), statistics.median(tenth)
            print(f"  removal ({stack_name}): small {small:.3f} s ({removal.chunks} chunk; {_costs(full_costs)}), "
                  f"large {large:.3f} s ({big.chunks} chunks; {large_lookups} look-ups returning {large_rows} rows), "
                  f"small at {n // 10} documents {small_tenth:.3f} s ({_costs(tenth_costs)})", flush=True)
        finally:
            await running.stop()
        results.add(
            Figure(f"remove one document of {n}", small, "s", 2.0 if stack_name == "embedded" else None,
                   stack=stack_name, spread=spread(full),
                   note=f"median of {SAMPLES}; {removal.knowledge_triples} edges removed, {removal.kept_triples} "
                        f"kept; {load_note()}"),
            Figure(f"remove a {big.chunks}-chunk document of {n}", large, "s", stack=stack_name,
                   note=f"{big.knowledge_triples} edges, {big.provenance_triples} provenance triples"),
            Figure(f"remove one document: collection of {n} / of {n // 10}", small / small_tenth, "x",
                   stack=stack_name, spread=spread(tenth),
                   note="about 1 when the cost does not follow the collection (the spread is of the smaller one)"),
            Figure(f"triple-store look-ups removing one document of {n} / of {n // 10}",
                   max(lookups for lookups, _rows in full_costs) / max(lookups for lookups, _rows in tenth_costs),
                   "x", stack=stack_name, note=f"of {n}: {_costs(full_costs)}; of {n // 10}: {_costs(tenth_costs)}"),
            Figure(f"triple-store look-ups removing the {big.chunks}-chunk document / one small one",
                   large_lookups / max(lookups for lookups, _rows in full_costs), "x", stack=stack_name,
                   note=f"{large_lookups} look-ups returning {large_rows} rows"),
        )
    return results


def run(quick: bool = False, suite: Suite | None = None) -> Results:
    return run_on_suite(quick, suite, lambda s: bench(s))


def main(argv=None) -> Results:
    parser = bench_parser(__doc__, "a fifth of the documents on the distributed stack")
    args = parser.parse_args(argv)
    return report(run(args.quick), "removal", args.json)


if __name__ == "__main__":
    main()
