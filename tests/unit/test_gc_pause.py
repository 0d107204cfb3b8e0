"""gc_paused: the cyclic collector is off inside, and back on only when the last overlapping pause ends."""

from __future__ import annotations

import gc
import threading

import pytest

from trustgraph_base.schema.primitives import Triple, iri
from trustgraph_base.store import triples as store_triples
from trustgraph_base.store.gc_pause import gc_paused
from trustgraph_base.store.sqlite.triples import SqliteTriplesStore


@pytest.fixture(autouse=True)
def collector_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_paused_inside_and_resumed_after():
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_resumed_after_an_exception():
    with pytest.raises(RuntimeError):
        with gc_paused():
            raise RuntimeError("insert failed")
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled():
    gc.disable()
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_overlapping_pauses_resume_when_the_last_one_ends():
    inside, release = threading.Event(), threading.Event()

    def other_writer():
        with gc_paused():
            inside.set()
            release.wait(10)

    thread = threading.Thread(target=other_writer)
    with gc_paused():
        thread.start()
        assert inside.wait(10)
    assert not gc.isenabled(), "the other thread's bulk write is still running"
    release.set()
    thread.join(10)
    assert gc.isenabled()


def test_store_insert_pauses_the_collector_and_resumes_it(tmp_path, monkeypatch):
    seen = []
    store = SqliteTriplesStore(home=tmp_path)
    real = store_triples.prepare_triples

    def spy(*args):
        seen.append(gc.isenabled())
        return real(*args)

    monkeypatch.setattr(store_triples, "prepare_triples", spy)
    assert store.insert("alice", "c", [Triple(iri("http://e/a"), iri("http://e/p"), iri("http://e/b"))]) == 1
    assert seen == [False] and gc.isenabled()
    store.close()
