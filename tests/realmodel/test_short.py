"""The real-model tier's short form: a real model through every LLM path of the product, streaming on.

One small document is ingested with the LLM extractor; then one GraphRAG, one DocumentRAG and one agent
question (which needs a tool: the document's facts are made up, so the model cannot know them).  What is
checked is structure and faithfulness, never wording: the stored trace is SHACL-valid and complete; the
edges it says were selected are among the candidates the model was really offered (read from the
requests themselves, through a recording proxy) and exist in the knowledge graph; every selection has a
non-empty reason, the one the model gave; the answer the client streamed is the answer stored in the
librarian; each model call's model is recorded, with its tokens as the endpoint reported them (none when
it sent none: llama.cpp sends no usage with a streamed answer); the model was asked to stream.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from trustgraph_base.provenance import namespaces as ns
from trustgraph_base.provenance.triples import edge_id
from trustgraph_base.rdf.validation import validate_trace
from trustgraph_base.schema import TRIPLE, AgentRequest, DocumentRagQuery, GraphRagQuery, TriplePattern
from trustgraph_flow.embedded import INGEST, QUERY_STACK, start_embedded
from trustgraph_flow.model.prompts.templates import parse_rendered

pytestmark = pytest.mark.timeout(3600)

DOC_ID = "https://trustgraph.ai/doc/realmodel-korvanite"
#: Made-up facts: a model that answers them right read them from the graph or the document.
TEXT = """# Korvanite

Aldren Vosk is a chemist who works at the Tessaly Institute in Maribel.
In 2019 Aldren Vosk discovered the mineral korvanite in the Pellan Mountains.
The Tessaly Institute was founded by Mira Olund in 1952.
Korvanite is named after the village of Korvan.
"""
GRAPH_QUESTION = "Who discovered korvanite?"
DOC_QUESTION = "Where is the Tessaly Institute?"
AGENT_QUESTION = "Who founded the institute where Aldren Vosk works?"
#: Small limits keep the prompts short: a 1.5B model on two cores prefills about 60-95 tokens a second.
GRAPH_RAG = {"entity_limit": 10, "triple_limit": 20, "max_subgraph_size": 40, "edge_limit": 8}
TOOLS = [
    {"name": "knowledge-query", "kind": "graph-rag",
     "description": "Ask the knowledge graph a question about people, places, organisations and discoveries.",
     "arguments": [{"name": "question", "description": "the question"}]},
    {"name": "document-query", "kind": "document-rag",
     "description": "Search the loaded documents for passages that answer a question.",
     "arguments": [{"name": "question", "description": "the question"}]},
]
#: How long the client waits for one whole query (several model calls in a row).
QUERY_TIMEOUT = 1800


@dataclass
class Loaded:
    """The ingested document on one deployment, as the stores held it right after ingestion.

    ``embedded``: in-process bus, SQLite under ``home``; ``distributed``: the same processors over the
    integration Pulsar and Cassandra (``pulsar``, ``cassandra``), under a user of their own.
    """

    kind: str
    user: str
    collection: str
    home: Path
    seconds: float = 0.0
    pulsar: Any = None
    cassandra: Any = None
    edges: list = field(default_factory=list)
    source: list = field(default_factory=list)

    def stack_options(self) -> dict:
        from trustgraph_base.pubsub import open_backend

        if self.kind == "embedded":
            return {"home": self.home}
        from trustgraph_base.store.cassandra.connection import CassandraConfig

        return {"backend": open_backend("pulsar", url=self.pulsar.url, admin_url=self.pulsar.admin_url),
                "store": "cassandra", "store_options": {"config": CassandraConfig(
                    hosts=(self.cassandra.host,), port=int(self.cassandra.port))}}


def store_of(stack, attribute: str):
    return next(s for s in stack.stores if hasattr(s, attribute))


async def start(loaded: Loaded, llama, only):
    return await start_embedded(only=only, llm="openai", flow=f"f{uuid.uuid4().hex[:8]}",
                                settings=llama.settings(**{"graph-rag": GRAPH_RAG, "agent-manager-react": {
                                    "tools": TOOLS, "max_iterations": 4}}), **loaded.stack_options())


async def _ingest(loaded: Loaded, llama) -> None:
    from trustgraph_cli.connection import Connection
    from trustgraph_cli.load import load_documents

    stack = await start(loaded, llama, tuple(dict.fromkeys(INGEST)))
    try:
        t0 = time.monotonic()
        async with Connection.attach(stack, timeout=QUERY_TIMEOUT) as conn:
            await load_documents(conn, loaded.user, loaded.collection,
                                 [(DOC_ID, "Korvanite", "text/markdown", TEXT.encode())],
                                 idle_timeout=QUERY_TIMEOUT, show=False)
        await stack.wait_idle(timeout=QUERY_TIMEOUT)
        loaded.seconds = time.monotonic() - t0
        triples = store_of(stack, "list_traces")
        loaded.edges = [t for b in triples.iter_query(loaded.user, loaded.collection, TriplePattern(g=""))
                        for t in b]
        loaded.source = [t for b in triples.iter_query(loaded.user, loaded.collection,
                                                       TriplePattern(g=ns.GRAPH_SOURCE)) for t in b]
    finally:
        await stack.stop()


def _drop_keyspaces(loaded: Loaded) -> None:
    from trustgraph_base.store.cassandra.connection import CassandraConfig, connect
    from trustgraph_base.store.names import storage_name

    session = connect(CassandraConfig(hosts=(loaded.cassandra.host,), port=int(loaded.cassandra.port)))
    for prefix in ("tg", "tgv"):
        try:
            session.execute(f"DROP KEYSPACE IF EXISTS {storage_name(prefix, loaded.user)}", timeout=180)
        except Exception as e:  # noqa: BLE001 - a slow drop on a busy node must not fail the tests
            import warnings

            warnings.warn(f"could not drop keyspace of {loaded.user}: {e}", stacklevel=2)


@pytest.fixture(scope="module", params=[
    pytest.param("embedded", id="embedded"),
    pytest.param("distributed", marks=[pytest.mark.real_llm_full, pytest.mark.integration], id="distributed"),
])
def loaded(request, llama, tmp_path_factory):
    """The document ingested with the LLM extractor into a collection of its own, per deployment."""
    kind = request.param
    result = Loaded(kind, f"real{uuid.uuid4().hex[:8]}", "korvanite", tmp_path_factory.mktemp("tg-home"))
    if kind == "distributed":
        result.pulsar = request.getfixturevalue("pulsar_service")
        result.cassandra = request.getfixturevalue("cassandra_service")
    try:
        asyncio.run(_ingest(result, llama))
        print(f"\n[realmodel] {kind}: ingestion with LLM extraction: {result.seconds:.1f} s, "
              f"{len(result.edges)} knowledge triples")
        yield result
    finally:
        if kind == "distributed":
            _drop_keyspaces(result)


async def ask(loaded: Loaded, llama, service: str, request):
    """Stream ``request`` to ``service`` on a query stack of its own; the messages and the stored trace."""
    from trustgraph_base.provenance.trace_reading import read_trace
    from trustgraph_cli.connection import Connection

    stack = await start(loaded, llama, QUERY_STACK)
    try:
        async with Connection.attach(stack, timeout=QUERY_TIMEOUT) as conn:
            msgs = [m async for m in (await conn.client(service)).stream(request)]
            await stack.wait_idle(timeout=QUERY_TIMEOUT)
            root = msgs[0].explain_id if service != "agent" else f"urn:trustgraph:agent:{request.session_id}"
            read = await read_trace(conn, loaded.user, loaded.collection, root)
    finally:
        await stack.stop()
    assert read is not None, f"no trace stored for {root}"
    return msgs, read


def chats_for(llama, template: str, since: int = 0) -> list[tuple[dict, object]]:
    """``(what the prompt offered, exchange)`` of the chat requests for ``template`` recorded after exchange
    ``since``, read from the readable prompt the model was sent (it carries no terms block)."""
    found = []
    for e in llama.proxy.chats()[since:]:
        messages = e.request.get("messages", [])
        system = next((m["content"] for m in messages if m.get("role") == "system"), "")
        user = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
        tid, terms = parse_rendered(system, user)
        assert terms is None, "the model was sent the terms block"
        if tid == template:
            found.append((offered_in(user), e))
    return found


_SELECTION_EDGE = re.compile(r'^\((.*?)\)-\[(.*?) \{id: "([^"]*)"\}\]->\((.*)\)$')
_STATEMENT = re.compile(r"^\((.*?)\)-\[(.*?)\]->\((.*)\)$")
_EXCERPT = re.compile(r"^\[(.+?)\](?: \(score [-0-9.]+\))?$")


def offered_in(user: str) -> dict:
    """The edges (``knowledge``: id, s, p, o) or excerpts (``documents``: id) a readable prompt lists (the
    sample's labels hold no brackets, so the lines read back unambiguously)."""
    lines = user.split("\n")
    knowledge = [{"id": m[3], "s": m[1], "p": m[2], "o": m[4]} for m in map(_SELECTION_EDGE.match, lines) if m]
    if not knowledge:
        knowledge = [{"s": m[1], "p": m[2], "o": m[3]} for m in map(_STATEMENT.match, lines) if m]
    return {"knowledge": knowledge, "documents": [{"id": m[1]} for m in map(_EXCERPT.match, lines) if m]}


def reply_text(exchange) -> str:
    """The model's text in a recorded reply, streamed (SSE) or not."""
    if exchange.request.get("stream"):
        pieces = []
        for line in exchange.reply.splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                for choice in json.loads(line[6:]).get("choices", []):
                    pieces.append((choice.get("delta") or {}).get("content") or "")
        return "".join(pieces)
    return json.loads(exchange.reply)["choices"][0]["message"]["content"] or ""


def is_response_format_refusal(exchange) -> bool:
    """A request the server refused for its ``response_format`` shape (llama.cpp: HTTP 500, a validation error)."""
    return exchange.status != 200 and "response_format" in exchange.reply and bool(exchange.request.get(
        "response_format"))


def selection_objects(text: str) -> list:
    """The edge selections of a reply: the structured answer's ``edges``, else one JSON object per line."""
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict) and isinstance(whole.get("edges"), list):
        return whole["edges"]
    objects = []
    for line in text.splitlines():
        try:
            objects.append(json.loads(line))
        except ValueError:
            continue
    return objects


def assert_valid(read) -> None:
    report = validate_trace(read.triples)
    assert report.conforms, [v.message for v in report.violations]


def assert_usage(usage, llama, what: str, exchanges: list | None = None) -> None:
    """The stage records its model call: the model that served it and its token counts as the endpoint reported
    them (``exchanges``: the calls that may be the stage's): none recorded when no reply carried usage (llama.cpp
    sends none with a streamed answer, and :meth:`OpenAICompletion.complete` streams), else positive counts."""
    from llama_server import usage_of

    assert usage is not None, f"{what}: no model call recorded"
    assert usage["model"] == llama.model, f"{what}: model {usage['model']!r}, served {llama.model!r}"
    if exchanges is None:
        return
    if all(usage_of(e) is None for e in exchanges):
        assert (usage["in_token"], usage["out_token"]) == (None, None), f"{what}: {usage}, reported none"
    else:
        assert usage["in_token"] > 0 and usage["out_token"] > 0, f"{what}: {usage}"


#: The streamed answers, for the token check below ((deployment, service) -> (stored trace, the model's reply)).
STREAMED: dict[tuple[str, str], tuple[Any, Any]] = {}


# ------------------------------------------------------------------ ingestion
def test_ingestion_extracts_edges_with_the_model(loaded, llama):
    calls = {tid: chats_for(llama, tid) for tid in ("extract-relationships", "extract-definitions")}
    assert all(calls.values()), f"the LLM extractor did not ask the model: {list(calls)}"
    assert all(e.status == 200 for found in calls.values() for _, e in found)
    edges = [t for t in loaded.edges if t.p.value != ns.RDFS_LABEL]
    replies = "\n---\n".join(reply_text(e) for _, e in calls["extract-relationships"])
    assert edges, f"the model's extraction gave no edge; it answered:\n{replies}"
    # every edge traces back to its chunk, and the chunk to the document; the activity names the model
    contained = {(t.o.triple.s.value, t.o.triple.p.value, t.o.triple.o.value) for t in loaded.source
                 if t.p.value == ns.TG_CONTAINS and t.o.type == TRIPLE}
    keys = {(t.s.value, t.p.value, t.o.value) for t in edges}
    assert keys <= contained, f"edges without extraction provenance: {keys - contained}"
    models = {t.o.value for t in loaded.source if t.p.value == ns.TG_LLM_MODEL}
    assert models == {llama.model}, models
    chunks = {t.o.value for t in loaded.source if t.p.value == ns.PROV_WAS_DERIVED_FROM and
              t.o.value.startswith("urn:chunk:")}
    assert chunks and all(any(t.s.value == c and t.p.value == ns.PROV_WAS_DERIVED_FROM for t in loaded.source)
                          for c in chunks)


# ------------------------------------------------------------------ GraphRAG
async def test_graph_rag_selects_offered_edges_with_reasons(loaded, llama):
    since = len(llama.proxy.chats())
    msgs, read = await ask(loaded, llama, "graph-rag", GraphRagQuery(
        query=GRAPH_QUESTION, user=loaded.user, collection=loaded.collection, streaming=True))
    assert msgs[-1].end_of_session and msgs[-1].error is None, msgs[-1].error
    trace = read.trace
    assert_valid(read)
    assert trace["status"] == "complete" and trace["error"] is None, trace.get("error")
    # what the model was offered, from the request itself
    every_call = chats_for(llama, "kg-edge-selection", since)
    # llama.cpp refuses OpenAI's json_schema shape (HTTP 500, a validation error naming response_format); the
    # prompter then asks in llama.cpp's own shape, once per endpoint (remembered)
    refused = [e for _, e in every_call if is_response_format_refusal(e)]
    selection_calls = [(t, e) for t, e in every_call if e.status == 200]
    assert len(refused) <= 1 and len(selection_calls) == 1, [(e.status, e.request.get("response_format", {}).get(
        "type")) for _, e in every_call]
    terms, exchange = selection_calls[0]
    offered = {k["id"]: (k["s"], k["p"], k["o"]) for k in terms["knowledge"]}
    assert offered and len(offered) <= trace["exploration"]["edge_count"]
    answered = {}
    for obj in selection_objects(reply_text(exchange)):
        if isinstance(obj, dict) and isinstance(obj.get("id"), str):
            answered.setdefault(obj["id"].strip(), obj.get("reasoning"))
    focus = trace["focus"]
    selected = focus["selected_edges"]
    graph = {(t.s.value, t.p.value, t.o.value) for t in loaded.edges}
    for e in selected:
        labels = (e["labels"]["s"], e["labels"]["p"], e["labels"]["o"])
        eid = edge_id(*labels)
        assert eid in offered, f"selected edge {labels} was not among the {len(offered)} candidates"
        assert (e["edge"]["s"]["value"], e["edge"]["p"]["value"], e["edge"]["o"]["value"]) in graph
        assert e["reasoning"].strip(), f"selected edge {labels} has no reason"
        assert e["reasoning"] == answered.get(eid), f"recorded reason {e['reasoning']!r} is not the model's"
    assert len(selected) <= GRAPH_RAG["edge_limit"]
    assert_usage(focus["usage"], llama, "edge selection", [selection_calls[0][1]])
    # the answer: streamed by the model, streamed to the client, stored in the librarian
    streamed = "".join(m.response for m in msgs if m.message_type == "chunk" and m.response)
    stored = trace["synthesis"]["answer"]
    assert stored and stored.strip() and stored == streamed
    if selected:
        synthesis_calls = chats_for(llama, "kg-synthesis", since)
        assert len(synthesis_calls) == 1 and synthesis_calls[0][1].request.get("stream") is True
        assert [k["s"] for k in synthesis_calls[0][0]["knowledge"]] == [e["labels"]["s"] for e in selected]
        assert_usage(trace["synthesis"]["usage"], llama, "synthesis")
        STREAMED[loaded.kind, "graph-rag"] = (read, synthesis_calls[0][1])
    print(f"\n[realmodel] graph-rag: {len(offered)} candidates, {len(selected)} selected, "
          f"{focus['dropped']} dropped; answer: {stored[:200]!r}")


# ------------------------------------------------------------------ DocumentRAG
async def test_document_rag_answers_from_the_chunks_it_records(loaded, llama):
    since = len(llama.proxy.chats())
    msgs, read = await ask(loaded, llama, "document-rag", DocumentRagQuery(
        query=DOC_QUESTION, user=loaded.user, collection=loaded.collection, doc_limit=2, streaming=True))
    assert msgs[-1].end_of_session and msgs[-1].error is None, msgs[-1].error
    trace = read.trace
    assert_valid(read)
    assert trace["status"] == "complete", trace.get("error")
    calls = chats_for(llama, "document-prompt", since)
    assert len(calls) == 1 and calls[0][1].request.get("stream") is True
    offered = {d["id"] for d in calls[0][0]["documents"]}
    chunks = trace["exploration"]["chunks"]
    assert {c["uri"] for c in chunks} == offered
    for c in chunks:  # each chunk leads back to the ingested document
        assert any(link["uri"] == DOC_ID for link in c["chain"]), c
    streamed = "".join(m.response for m in msgs if m.response)
    assert trace["synthesis"]["answer"] and trace["synthesis"]["answer"] == streamed
    assert_usage(trace["synthesis"]["usage"], llama, "document answer")
    STREAMED[loaded.kind, "document-rag"] = (read, calls[0][1])
    print(f"\n[realmodel] document-rag answer: {streamed[:200]!r}")


# ------------------------------------------------------------------ agent
async def test_agent_calls_a_tool_and_links_its_trace(loaded, llama):
    since = len(llama.proxy.chats())
    sid = f"real-{uuid.uuid4().hex[:8]}"
    msgs, read = await ask(loaded, llama, "agent", AgentRequest(
        question=AGENT_QUESTION, user=loaded.user, collection=loaded.collection, streaming=True, session_id=sid,
        max_iterations=4))
    errors = [m for m in msgs if m.message_type == "error" or m.error is not None]
    assert not errors, errors
    assert msgs[-1].end_of_dialog
    trace = read.trace
    assert_valid(read)
    assert trace["status"] == "complete", trace.get("error")
    # the agent asks the model without streaming, whatever the request says (streaming=True only streams
    # the agent's own messages); what counts here is that every step is the model's
    react = chats_for(llama, "agent-react", since)
    assert len(react) >= 2, f"{len(react)} agent-react call(s): a tool call needs at least two"
    analyses = trace["analyses"]
    transcript = "\n---\n".join(reply_text(e) for _, e in react)
    tool_calls = [a for a in analyses if a["action"] in {t["name"] for t in TOOLS}]
    assert tool_calls, f"the model answered without calling a tool; it wrote:\n{transcript}"
    for a in analyses:
        assert_usage(a["usage"], llama, f"analysis {a['uri']}", [e for _, e in react])
        assert a["observation"] is not None, f"{a['uri']} has no observation"
    for a in tool_calls:
        assert a["sub_traces"], f"{a['uri']} called {a['action']} but no sub-trace is linked"
        for sub in a["sub_traces"]:
            assert sub["parent"] == a["uri"] and sub["status"] == "complete", sub.get("error")
    answer = "".join(m.content for m in msgs if m.message_type == "answer")
    assert trace["conclusion"]["answer"] and trace["conclusion"]["answer"].strip() == answer.strip()
    print(f"\n[realmodel] agent: {len(analyses)} step(s), tools {[a['action'] for a in analyses]}, "
          f"{trace['conclusion'].get('termination_reason')}; answer: {answer[:200]!r}\n"
          f"[realmodel] the model wrote:\n{transcript}")


# ------------------------------------------------------------------ unreported usage
def test_streamed_answers_record_what_the_endpoint_reported(loaded, llama):
    """llama-cpp-python 0.3.36's server ignores ``stream_options.include_usage``: a streamed answer carries no
    usage.  The Synthesis then records the model and no token counts (unknown, never 0), and ``--show-usage``
    says so; were usage sent, the trace would record exactly it."""
    from llama_server import usage_of

    from trustgraph_cli.usage import NOT_REPORTED, UsageLog

    mine = {name: streamed for (kind, name), streamed in STREAMED.items() if kind == loaded.kind}
    if set(mine) != {"graph-rag", "document-rag"}:
        pytest.fail(f"the streamed GraphRAG and DocumentRAG answers did not both pass (got {sorted(mine)})")
    for name, (read, exchange) in mine.items():
        synthesis = read.trace["synthesis"]
        sent = usage_of(exchange)
        counts = [t for t in read.triples if t.s.value == synthesis["uri"]
                  and t.p.value in (ns.TG_IN_TOKEN, ns.TG_OUT_TOKEN)]
        assert synthesis["usage"]["model"] == llama.model, f"{name}: {synthesis['usage']}"
        if sent is None:
            assert (synthesis["usage"]["in_token"], synthesis["usage"]["out_token"]) == (None, None), name
            assert counts == [], f"{name}: token counts recorded that the endpoint did not report: {counts}"
            usage = UsageLog()
            usage.event(synthesis["uri"], read.triples)
            assert [c.reported for c in usage.calls] == [False] and usage.unreported() == 1, usage.calls
        else:
            assert (synthesis["usage"]["in_token"], synthesis["usage"]["out_token"]) == (
                sent["prompt_tokens"], sent["completion_tokens"]), f"{name}: {synthesis['usage']} != {sent}"
        print(f"\n[realmodel] {name} synthesis: endpoint usage {sent}; recorded {synthesis['usage']}"
              + ("" if sent else f" ({NOT_REPORTED})"))


# ------------------------------------------------------------------ guard
def test_every_model_call_succeeded(loaded, llama):
    """Runs last in this module: no model call of the tier failed or was retried (but for the one refusal of OpenAI's
    response_format shape per stack, which the prompter remembers)."""
    chats = llama.proxy.chats()
    refusals = [e for e in chats if is_response_format_refusal(e)]
    failed = [(e.path, e.status, e.reply[:300]) for e in chats if e.status != 200 and e not in refusals]
    assert not failed, failed
    assert len(refusals) <= 2, f"{len(refusals)} response_format refusals: the prompter did not remember them"
