"""graph-rag: the GraphRAG service with query-time explainability.

Consumes ``GraphRagQuery`` on ``request:tg:graph-rag:<flow>`` and streams
``GraphRagResponse`` messages (explain events, answer chunks, a final message).  Explain
triples also go to the ``explainability`` producer (the ``triples-store`` flow queue), in the
request's user and collection unless ``--explain-collection`` redirects them; the answer goes
to the librarian on the ``answers`` producer (the ``answer-store`` flow queue), together with
the Synthesis stage, which the librarian stores after the answer.
"""

from __future__ import annotations

import argparse

from trustgraph_base.processor import ConfigurationError, Processor, launch
from trustgraph_base.schema import GraphRagQuery

from ...common.ports import BusPorts
from ...common.services import client_spec, explain_producer_specs, request_spec
from .budget import BUDGET_ENV, configured_budget
from .rag import GraphRag, GraphRagSettings


class GraphRagService(Processor):
    """Answers questions over the knowledge graph and explains how."""

    default_id = "graph-rag"

    def __init__(self, *, entity_limit: int = 50, triple_limit: int = 30, max_subgraph_size: int = 150,
                 max_path_length: int = 2, edge_limit: int = 25, explain_collection: str = "",
                 selection_token_budget: int | None = None, client_timeouts: dict[str, float] | None = None,
                 **params):
        super().__init__(**params)
        if selection_token_budget is None:
            try:
                selection_token_budget = configured_budget()
            except ValueError as e:
                raise ConfigurationError(f"graph-rag: {e}") from None
        if selection_token_budget < 0:
            raise ConfigurationError(f"graph-rag: --selection-token-budget must be >= 0 (0: no cut), "
                                     f"got {selection_token_budget}")
        self.add(request_spec("graph-rag", self.flow, self.on_request))
        for spec in explain_producer_specs(self.flow):
            self.add(spec)
        for service in ("embeddings", "graph-embeddings", "triples", "prompt"):
            self.add(client_spec(service, self.flow, timeout=(client_timeouts or {}).get(service)))
        self.ports = BusPorts(self)
        self.rag = GraphRag(self.ports, GraphRagSettings(entity_limit, triple_limit, max_subgraph_size,
                                                         max_path_length, edge_limit, explain_collection,
                                                         selection_token_budget))

    async def on_request(self, req: GraphRagQuery, ctx) -> None:
        await self.rag.query(req, ctx.respond)

    @classmethod
    def add_args(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--entity-limit", type=int, default=50)
        parser.add_argument("--triple-limit", type=int, default=30)
        parser.add_argument("--max-subgraph-size", type=int, default=150)
        parser.add_argument("--max-path-length", type=int, default=2)
        parser.add_argument("--edge-limit", type=int, default=25)
        parser.add_argument("--explain-collection", default="",
                            help="store explain triples in this collection instead of the request's")
        parser.add_argument("--selection-token-budget", type=int, default=None,
                            help=f"most tokens of the edge-selection prompt; 0 = send every candidate edge "
                                 f"(env {BUDGET_ENV}, default 3000)")

    @classmethod
    def params_from_args(cls, args: argparse.Namespace) -> dict:
        return {"entity_limit": args.entity_limit, "triple_limit": args.triple_limit,
                "max_subgraph_size": args.max_subgraph_size, "max_path_length": args.max_path_length,
                "edge_limit": args.edge_limit, "explain_collection": args.explain_collection,
                "selection_token_budget": args.selection_token_budget}


def run() -> None:
    launch(GraphRagService)
