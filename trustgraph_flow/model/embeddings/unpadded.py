"""The packaged model's graph without the work that only padded input needs.

The exported all-MiniLM-L6-v2 graph has two steps that only matter for padded input. Before
every softmax it adds a bias computed from ``attention_mask``, to mask padding. After every
softmax it replaces NaN (``IsNaN`` + ``Where``), which only appears in a row whose keys are all
masked.

The local embedder never pads (:mod:`.local`), so for its input the bias is zero and no row is
fully masked. Both steps change nothing there, yet they cost about 9% of a 165-token run (38.7 ms
down to 35.2 ms; ``bench/README.md``). :func:`unpadded_graph` removes them and the mask's now
unused nodes. The vectors stay bit for bit the same, which ``tests/unit/test_unpadded_graph.py``
checks over texts of every length, alone and in shared runs.

The graph is edited through a minimal protobuf schema of ONNX's ``ModelProto``. It declares only
the fields read here (a node's inputs, outputs, name and type); protobuf keeps every other field,
such as weights and attributes, byte for byte as an unknown field. This avoids making the
``onnx`` package (69 MB installed) a dependency for one edit.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from functools import lru_cache
from typing import Any

log = logging.getLogger(__name__)

#: The input whose use this edit removes.
MASK_INPUT = "attention_mask"
#: The inputs the scores are computed from.
TOKEN_INPUTS = ("input_ids", "token_type_ids")


@lru_cache(maxsize=1)
def _model_class() -> Any:
    """A message class for ONNX ``ModelProto`` that reads ``graph.node`` and keeps everything else as is."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    string, message = field.TYPE_STRING, field.TYPE_MESSAGE
    repeated, optional = field.LABEL_REPEATED, field.LABEL_OPTIONAL
    schema = descriptor_pb2.FileDescriptorProto(name="trustgraph_onnx_nodes.proto", package="trustgraph_onnx_nodes",
                                                syntax="proto2")
    node = schema.message_type.add(name="NodeProto")  # field numbers as in onnx.proto
    node.field.add(name="input", number=1, type=string, label=repeated)
    node.field.add(name="output", number=2, type=string, label=repeated)
    node.field.add(name="name", number=3, type=string, label=optional)
    node.field.add(name="op_type", number=4, type=string, label=optional)
    graph = schema.message_type.add(name="GraphProto")
    graph.field.add(name="node", number=1, type=message, label=repeated, type_name=".trustgraph_onnx_nodes.NodeProto")
    model = schema.message_type.add(name="ModelProto")
    model.field.add(name="graph", number=7, type=message, label=optional, type_name=".trustgraph_onnx_nodes.GraphProto")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(schema)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("trustgraph_onnx_nodes.ModelProto"))


def unpadded_graph(model: bytes, softmaxes: int = 6) -> bytes | None:
    """``model`` (a serialised ONNX model) without the mask bias and the NaN guards, or ``None``.

    ``None`` means the graph does not have exactly ``softmaxes`` of each step in the expected shape
    (not the packaged model); the caller then uses the model as it is.

    :param model: the ONNX file's bytes.
    :param softmaxes: the attention layers of the model (one softmax each).
    """
    proto = _model_class()()
    proto.ParseFromString(model)
    nodes = list(proto.graph.node)
    producer = {out: n for n in nodes for out in n.output}
    # the bias: computed from the mask (and shapes), not from the tokens
    tokens = set().union(*(_downstream(nodes, name, through_shape=False) for name in TOKEN_INPUTS))
    from_mask = _downstream(nodes, MASK_INPUT) - tokens
    replace: dict[str, str] = {}  # a removed node's output -> the tensor that now stands for it
    removed: set[int] = set()
    guards = biases = 0
    for n in nodes:
        # Where(IsNaN(x), 0, x) after x = Softmax(...): x itself when x has no NaN
        if n.op_type == "Where" and len(n.input) == 3 and n.input[0] in producer:
            check = producer[n.input[0]]
            if (check.op_type == "IsNaN" and list(check.input) == [n.input[2]]
                    and getattr(producer.get(n.input[2]), "op_type", "") == "Softmax"):
                replace[n.output[0]] = n.input[2]
                removed |= {id(n), id(check)}
                guards += 1
        # scores + bias(attention_mask): the scores, when the bias is zero
        elif n.op_type == "Add" and len(n.input) == 2 and (n.input[0] in from_mask) != (n.input[1] in from_mask):
            scores = n.input[0] if n.input[1] in from_mask else n.input[1]
            if scores in tokens:
                replace[n.output[0]] = scores
                removed.add(id(n))
                biases += 1
    if guards != softmaxes or biases != softmaxes:
        log.info("unpadded graph: %d NaN guards and %d mask biases found, %d of each expected; graph kept as is",
                 guards, biases, softmaxes)
        return None
    kept = [n for n in nodes if id(n) not in removed]
    for n in kept:
        for position, name in enumerate(n.input):
            while name in replace:
                name = replace[name]
            n.input[position] = name
    kept = _without_unused(kept, {o for n in nodes for o in n.output} - {i for n in nodes for i in n.input})
    if any(MASK_INPUT in n.input for n in kept):
        return None
    serialised = [n.SerializeToString() for n in kept]  # before the repeated field they belong to is cleared
    del proto.graph.node[:]
    for node in serialised:
        proto.graph.node.add().ParseFromString(node)
    return proto.SerializeToString()


def _downstream(nodes: list, source: str, through_shape: bool = True) -> set[str]:
    """Every tensor computed, directly or not, from ``source`` (``through_shape=False``: not from its shape only)."""
    readers = defaultdict(list)
    for n in nodes:
        for name in n.input:
            readers[name].append(n)
    found, frontier = set(), [source]
    while frontier:
        for n in readers[frontier.pop()]:
            if n.op_type == "Shape" and not through_shape:
                continue
            for out in n.output:
                if out not in found:
                    found.add(out)
                    frontier.append(out)
    return found


def _without_unused(nodes: list, graph_outputs: set[str]) -> list:
    """``nodes`` without those whose outputs nothing reads (repeatedly), keeping the graph's outputs' producers.

    :param graph_outputs: tensors read by no node of the original graph (the model's outputs among them).
    """
    while True:
        read = {name for n in nodes for name in n.input} | graph_outputs
        used = [n for n in nodes if any(out in read for out in n.output)]
        if len(used) == len(nodes):
            return used
        nodes = used
