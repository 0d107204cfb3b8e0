"""The gateway's REST part fuzzed against its own OpenAPI document (schemathesis), on the embedded stack.

Every operation of ``/api/v1/openapi.json`` gets a bounded number of generated requests,
valid (positive) and invalid (negative), with the fuzzer's own token.  Then: no answer was a
5xx, every answer was JSON, nothing was stored from a refused request (the documents stored
are exactly those of accepted ``add-document`` calls; the traces stored are exactly one per
GraphRAG or DocumentRAG call that reached a service), and another user's data is unchanged.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections import Counter

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings

from trustgraph_flow.embedded import ALL, start_embedded
from trustgraph_flow.gateway.auth import Auth
from trustgraph_flow.gateway.openapi import openapi_document
from trustgraph_flow.gateway.service import ApiGateway

pytestmark = [pytest.mark.service, pytest.mark.timeout(900)]

FUZZER, BYSTANDER = "fuzzer", "bystander"
FUZZ_TOKEN, BYSTANDER_TOKEN = "fuzz-token-0123456789ab", "bystander-token-0123456789"
#: Generated requests per operation and generation mode.
EXAMPLES = 25
REFUSAL_TYPES = ("request-error", "gateway-error")


class GatewayThread:
    """The embedded stack and the gateway on an event loop of their own (the fuzzer calls synchronously)."""

    def __init__(self, home):
        self.home = home
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def run(self, coro, timeout: float = 300):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _start(self):
        self.stack = await start_embedded(self.home, only=ALL)
        self.gateway = ApiGateway(backend=self.stack.backend, flow=self.stack.flow, port=0,
                                  auth=Auth(((FUZZ_TOKEN, FUZZER), (BYSTANDER_TOKEN, BYSTANDER))))
        await self.gateway.start()

    async def _stop(self):
        await self.gateway.stop()
        await self.stack.stop()

    def start(self) -> GatewayThread:
        self.thread.start()
        self.run(self._start())
        return self

    def stop(self) -> None:
        self.run(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def stored(self, user: str) -> tuple[set[str], int, set[str]]:
        """Document ids (library collection), RAG traces (all collections; agent traces, whose session
        ids the fuzzer chooses, are not counted) and their URIs, of ``user``."""
        async def read():
            await self.stack.wait_idle()
            triples = next(s for s in self.stack.stores if hasattr(s, "list_traces"))
            librarian = next(s for s in self.stack.stores if hasattr(s, "find_document"))
            docs = {m.id for m in librarian.list_documents(user, "default")}
            uris = set()
            for collection in triples.list_collections(user):
                uris |= {t.uri for t in triples.list_traces(user, collection, "", 1000).traces
                         if not t.parent and not t.uri.startswith("urn:trustgraph:agent:")}
            return docs, len(uris), uris

        return self.run(read())


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = GatewayThread(tmp_path_factory.mktemp("fuzz-home")).start()
    yield s
    s.stop()


def test_rest_fuzzed_against_its_openapi_document(server):
    base = server.gateway.url.rstrip("/")
    http = requests.Session()
    auth = {"Authorization": f"Bearer {BYSTANDER_TOKEN}"}
    doc_id = "https://example.org/doc/bystander"
    added = http.post(f"{base}/api/v1/librarian", headers=auth, timeout=60, json={
        "operation": "add-document", "content": base64.b64encode(b"Radium glows in the dark.").decode(),
        "document-metadata": {"id": doc_id, "kind": "text/plain", "title": "kept"}})
    assert added.status_code == 200 and added.json() == {}
    asked = http.post(f"{base}/api/v1/flow/{server.gateway.flow}/service/graph-rag", headers=auth, timeout=120,
                      json={"query": "Who discovered radium?"})
    assert asked.status_code == 200 and "error" not in asked.json()
    bystander_before = server.stored(BYSTANDER)
    assert bystander_before[0] == {doc_id} and bystander_before[1] == 1

    schema = schemathesis.openapi.from_dict(openapi_document(server.gateway.flow))
    statuses: Counter = Counter()
    accepted_docs: set[str] = set()
    reached_rag = Counter()
    headers = {"Authorization": f"Bearer {FUZZ_TOKEN}"}

    for result in schema.get_all_operations():
        operation = result.ok()
        modes = [schemathesis.GenerationMode.POSITIVE]
        if operation.method.upper() == "POST":  # a GET without parameters has no invalid form
            modes.append(schemathesis.GenerationMode.NEGATIVE)
        for mode in modes:
            @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(generation_mode=mode))
            def fuzz(case):
                response = case.call(base_url=base, headers=headers, session=http, timeout=120)
                statuses[response.status_code] += 1
                assert response.status_code < 500, (case.path, case.body, response.text[:500])
                if response.status_code == 413:
                    return
                body = response.json()
                assert isinstance(body, dict), body
                error = body.get("error")
                if response.status_code != 200 or (error and error.get("type") in REFUSAL_TYPES):
                    return
                if case.path.endswith("/librarian") and isinstance(case.body, dict) \
                        and case.body.get("operation") == "add-document" and not error:
                    accepted_docs.add(case.body["document-metadata"]["id"])
                for kind in ("graph-rag", "document-rag"):
                    if case.path.endswith(f"/service/{kind}"):
                        reached_rag[kind] += 1

            fuzz()

    assert statuses and all(code < 500 for code in statuses), statuses
    docs, traces, _ = server.stored(FUZZER)
    assert docs == accepted_docs
    assert traces == sum(reached_rag.values())
    assert server.stored(BYSTANDER) == bystander_before
