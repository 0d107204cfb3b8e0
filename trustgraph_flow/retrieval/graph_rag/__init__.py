"""GraphRAG: seed entities, subgraph exploration, LLM edge selection with reasons, synthesis, traces.

- :mod:`.subgraph`: exploration plan and the growing subgraph (pure).
- :mod:`.labels`: the label graph the LLM sees and the map back to original terms (pure).
- :mod:`.selection`: turning the LLM's JSONL into edge selections (pure).
- :mod:`.rag`: the query orchestration against abstract ports, emitting explain events.
- :mod:`.service`: the ``graph-rag`` processor wiring.
"""
