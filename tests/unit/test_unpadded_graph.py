"""The packaged model without its padding-only steps: the same vectors, bit for bit, and nothing else removed.

Real onnxruntime sessions over the packaged model file, one running the graph as exported and
one the unpadded graph (:mod:`trustgraph_flow.model.embeddings.unpadded`).
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from trustgraph_flow.model.embeddings import local
from trustgraph_flow.model.embeddings.local import LocalEmbedder, default_model_path
from trustgraph_flow.model.embeddings.unpadded import MASK_INPUT, _model_class, unpadded_graph

WORDS = ("polonium radium uranium rays Curie Becquerel Rutherford nucleus atom Paris 1898 decay "
         "thorium discovered the of and in with was by emits isotope chemist Sorbonne").split()


@pytest.fixture(scope="module")
def embedders() -> tuple[LocalEmbedder, LocalEmbedder]:
    exported, unpadded = LocalEmbedder(workers=1, cache_size=0, unpadded=False), LocalEmbedder(workers=1, cache_size=0)
    exported.load()
    unpadded.load()
    return exported, unpadded


def _ops(model: bytes) -> Counter:
    proto = _model_class()()
    proto.ParseFromString(model)
    return Counter(n.op_type for n in proto.graph.node)


def _texts() -> list[str]:
    """Texts from 1 word to past the 256-token truncation, in steps, and a few of each short length."""
    rnd = random.Random(7)
    lengths = [*range(1, 30), *range(30, 330, 23), *[n for n in range(1, 12) for _ in range(3)]]
    return [" ".join(rnd.choice(WORDS) for _ in range(n)) for n in lengths]


def test_the_embedder_runs_the_unpadded_graph_by_default(embedders):
    exported, unpadded = embedders
    assert (exported.graph, unpadded.graph) == ("as exported", "unpadded")
    assert unpadded.model_id == exported.model_id  # the same vectors: the same vector space


def test_the_unpadded_graph_gives_bit_identical_vectors_alone_and_in_shared_runs(embedders):
    exported, unpadded = embedders
    texts = _texts()
    for text in texts:
        assert np.array_equal(exported._embed_one(text), unpadded._embed_one(text)), text
    together = unpadded._embed_many(texts)  # same-length texts share runs
    assert all(np.array_equal(a, b) for a, b in zip(exported._embed_many(texts), together, strict=True))


def test_only_the_mask_bias_and_the_nan_guards_are_removed():
    model = default_model_path().read_bytes()
    edited = unpadded_graph(model)
    assert edited is not None
    before, after = _ops(model), _ops(edited)
    assert after["IsNaN"] == 0 and before["IsNaN"] == 6
    assert before["Where"] - after["Where"] == 7  # six NaN guards and the one that builds the bias
    assert before["Add"] - after["Add"] == 6  # the bias, once per layer
    for op in ("MatMul", "Softmax", "LayerNormalization", "Erf", "Gather", "Div", "Transpose"):
        assert after[op] == before[op], op
    proto = _model_class()()
    proto.ParseFromString(edited)
    assert not any(MASK_INPUT in n.input for n in proto.graph.node)
    # everything but the nodes is kept: the weights are the file's, byte for byte
    assert 0 < len(model) - len(edited) < 5_000


def test_a_graph_without_the_padding_steps_is_left_as_it_is():
    edited = unpadded_graph(default_model_path().read_bytes())
    assert edited is not None and unpadded_graph(edited) is None  # nothing left to remove
    proto = _model_class()()
    node = proto.graph.node.add(op_type="Softmax", name="softmax")
    node.input.append("x")
    node.output.append("y")
    assert unpadded_graph(proto.SerializeToString()) is None


def test_the_embedder_falls_back_to_the_exported_graph(monkeypatch, embedders):
    exported, _ = embedders
    monkeypatch.setattr(local, "unpadded_graph", lambda model: None)
    fallback = LocalEmbedder(workers=1, cache_size=0)
    fallback.load()
    assert fallback.graph == "as exported"
    assert np.array_equal(fallback._embed_one("Marie Curie discovered polonium."),
                          exported._embed_one("Marie Curie discovered polonium."))
