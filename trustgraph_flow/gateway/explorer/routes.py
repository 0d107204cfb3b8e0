"""The explorer's pages: the trace list, a trace's view, two traces compared, its exports, the documents its
sources name, and a question asked and watched.

Every page is rendered on the server (Jinja2 with autoescaping, so a question, an answer or a
label is always text, never markup) and needs no script, except the ask page, whose one module
(``ask.js``) reads the answer's event stream and sets what it receives as text.  Access follows the gateway's rules
(:mod:`..auth`): with tokens, a browser signs in once (``/explorer/login`` sets an HttpOnly cookie
holding the token) or sends ``Authorization: Bearer``; the token's user is the only user whose
traces, documents and exports a page reads, and naming another user is refused (403).  In open mode
(loopback only) ``?user=`` picks the user, as the workspace does for TrustGraph's clients.
Traces are read with :func:`trustgraph_base.provenance.trace_reading.read_trace`, as
``tg-show-explain-trace`` reads them.
"""

from __future__ import annotations

import logging
import re
import urllib.parse
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import jinja2
import orjson
from aiohttp import web

from trustgraph_base.processor import RequestResponseClient, RequestTimeout, ServiceError, raise_on_error
from trustgraph_base.provenance.trace_model import TYPE_NAMES, node_name
from trustgraph_base.provenance.trace_reading import read_trace, trace_documents_text, trace_statuses
from trustgraph_base.provenance.triples import OTEL_TRACE_ID
from trustgraph_base.provenance.uris import check_question_uri, parse_trace_uri
from trustgraph_base.pubsub import BackendError
from trustgraph_base.schema import (
    AgentRequest,
    DocumentRagQuery,
    GraphRagQuery,
    LibrarianRequest,
    TraceListRequest,
)
from trustgraph_base.store.names import InvalidName, check_collection

from ..auth import AccessDenied, Auth, bearer_token
from ..wire import GatewayRequestError
from .compare import compare_traces
from .layout import draw_dag, draw_edges

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
#: The cookie a signed-in browser sends its token in (HttpOnly, SameSite=Strict, this path only).
TOKEN_COOKIE = "tg_explorer_token"
#: Traces a list page shows, by default and at most.
PAGE_SIZE, MAX_PAGE_SIZE = 50, 500
#: Chunk texts fetched for one trace page (a chunk's text is shown under the edge it supports).
MAX_CHUNK_TEXTS = 200
EXPORTS = {"trig": ("application/trig", "trig"), "turtle": ("text/turtle", "ttl"),
           "json": ("application/json", "json")}
#: Every page: no script, no frames, nothing from elsewhere.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
}
#: The ask page runs its one script, from the gateway, and reads its event stream from the gateway.
ASK_HEADERS = {**SECURITY_HEADERS, "Content-Security-Policy": SECURITY_HEADERS["Content-Security-Policy"]
               + "; script-src 'self'; connect-src 'self'"}
_TYPE_FILTERS = ("", "graphrag", "docrag", "agent")
_STATUS_FILTERS = ("", "complete", "failed", "incomplete")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
#: Traces one filtered list page looks through before it shows what it found (and links to the next ones).
MAX_SCANNED = 10_000
#: What the ask page may ask, and how the page names it.
ASK_SERVICES = {"graph-rag": "GraphRAG", "document-rag": "DocumentRAG", "agent": "Agent"}
#: Longest question taken (as the services' own limit).
MAX_QUESTION = 100_000
#: The pages' icon: three linked nodes.
ICON = (b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><path d="M3 12 8 4 13 12z" fill="none" '
        b'stroke="#1f5fa8" stroke-width="1.5"/><circle cx="3" cy="12" r="2.2"/><circle cx="8" cy="4" r="2.2"/>'
        b'<circle cx="13" cy="12" r="2.2"/></svg>')


class PageError(Exception):
    """A page that cannot be shown: its HTTP status, a title and a one-line reason."""

    def __init__(self, status: int, title: str, message: str):
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


class _Services:
    """The gateway's clients as the trace reader's :class:`~trustgraph_base.provenance.trace_reading.Services`."""

    def __init__(self, client: Callable[[str], RequestResponseClient]):
        self._client = client

    async def request(self, service: str, request: Any) -> Any:
        return raise_on_error(service, await self._client(service).request(request))

    async def client(self, service: str) -> RequestResponseClient:
        return self._client(service)

    def stream(self, service: str, request: Any) -> AsyncIterator[Any]:
        return self._client(service).stream(request)


class Scope:
    """Whose traces a page shows (user, collection) and the links that keep to them."""

    def __init__(self, user: str, collection: str, named_user: str | None):
        self.user, self.collection = user, collection
        self.keep: dict[str, str] = {}
        if named_user:
            self.keep["user"] = user
        if collection != "default":
            self.keep["collection"] = collection

    def href(self, path: str, **params: str | None) -> str:
        query = {**self.keep, **{k: v for k, v in params.items() if v}}
        return path + ("?" + urllib.parse.urlencode(query) if query else "")

    def trace(self, uri: str) -> str:
        return self.href("/explorer/trace", uri=uri)


class Explorer:
    """The explorer's routes for one gateway: ``client`` gives the started client of a service by name."""

    def __init__(self, client: Callable[[str], RequestResponseClient], auth: Auth, *, tracing_ui_url: str = ""):
        """:param tracing_ui_url: an http(s) URL template with ``{trace_id}``: where the page links a trace's
            OpenTelemetry trace id (a Jaeger, Tempo or Phoenix UI); empty: the id is shown unlinked."""
        self.services = _Services(client)
        self.auth = auth
        self.tracing_ui_url = tracing_ui_url
        self.templates = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE), autoescape=True,
                                            undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.templates.filters["node_name"] = node_name
        self.css = (HERE / "explorer.css").read_bytes()
        self.js = (HERE / "ask.js").read_bytes()

    # ------------------------------------------------------------------ pages

    def _page(self, template: str, status: int = 200, headers: dict[str, str] | None = None,
              **context: Any) -> web.Response:
        body = self.templates.get_template(template).render(type_names=TYPE_NAMES, **context)
        return web.Response(text=body, status=status, content_type="text/html", charset="utf-8",
                            headers=headers or SECURITY_HEADERS)

    def _guarded(self, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                 ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        """``handler`` with every failure turned into an error page with its status."""

        async def run(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(request)
            except PageError as e:
                if e.status == 401 and "text/html" in request.headers.get("Accept", ""):
                    # a browser is sent to the sign-in form, and back here after it
                    query = urllib.parse.urlencode({"next": request.path_qs})
                    raise web.HTTPSeeOther(f"/explorer/login?{query}", headers=SECURITY_HEADERS) from None
                if e.status == 401:
                    return self._page("login.html", 401, message=e.message, next=request.path_qs)
                return self._page("error.html", e.status, title=e.title, message=e.message)
            except ServiceError as e:
                return self._page("error.html", 502, title="A service failed",
                                  message=f"{e.service}: {e.message}")
            except RequestTimeout as e:
                return self._page("error.html", 504, title="No answer in time", message=str(e))
            except BackendError as e:
                log.warning("explorer: bus failure: %s", e)
                return self._page("error.html", 503, title="The message bus failed", message=str(e))
            except web.HTTPException:
                raise
            except Exception:
                log.exception("explorer: %s failed", request.path)
                return self._page("error.html", 500, title="The page failed",
                                  message="the gateway could not show this page; its log says why")

        return run

    def _scope(self, request: web.Request) -> Scope:
        """The user and collection a request may read (see the module docstring), or a :class:`PageError`."""
        token = bearer_token(request.headers.get("Authorization")) or request.cookies.get(TOKEN_COOKIE)
        try:
            principal = self.auth.principal(token)
        except AccessDenied as e:
            raise PageError(401, "Sign in", "a token is required" if not token else "that token is not known") from e
        named = request.query.get("user") or None
        try:
            user = self.auth.user_for(principal, named)
        except AccessDenied as e:
            raise PageError(403, "Not allowed", str(e)) from e
        except GatewayRequestError as e:
            raise PageError(400, "Bad user", e.message) from e
        try:
            collection = check_collection(request.query.get("collection") or "default")
        except InvalidName as e:
            raise PageError(400, "Bad collection", str(e)) from e
        return Scope(user, collection, named)

    def _question(self, request: web.Request, name: str = "uri") -> str:
        uri = request.query.get(name, "").strip()
        try:
            check_question_uri(uri)
        except ValueError as e:
            raise PageError(400, "Not a trace", f"not a trace URI: {uri[:200]!r} (expected urn:trustgraph:question:"
                                                f"<uuid>, urn:trustgraph:docrag:<uuid> or "
                                                f"urn:trustgraph:agent:<session id>)") from e
        return uri

    async def trace_list(self, request: web.Request) -> web.StreamResponse:
        """Newest first, a page at a time; filtered by type (by the trace index), and by status, question text and
        time range (here, over the pages the index gives, :data:`MAX_SCANNED` traces at most per page shown)."""
        scope = self._scope(request)
        q = request.query
        kind, wanted_status = q.get("type", ""), q.get("status", "")
        text, since, until = q.get("q", "").strip(), q.get("from", "").strip(), q.get("to", "").strip()
        if kind not in _TYPE_FILTERS:
            raise PageError(400, "Bad filter", f"type must be one of graphrag, docrag, agent, not {kind[:40]!r}")
        if wanted_status not in _STATUS_FILTERS:
            raise PageError(400, "Bad filter", f"status must be one of complete, failed, incomplete, "
                                               f"not {wanted_status[:40]!r}")
        for name, value in (("from", since), ("to", until)):
            if value and not _DATE.fullmatch(value):
                raise PageError(400, "Bad filter", f"{name} must be a date as YYYY-MM-DD, not {value[:40]!r}")
        try:
            limit = int(q.get("limit") or PAGE_SIZE)
        except ValueError:
            limit = 0
        if not 1 <= limit <= MAX_PAGE_SIZE:
            raise PageError(400, "Bad limit", f"limit must be a number from 1 to {MAX_PAGE_SIZE}")
        cursor = q.get("cursor", "")
        filtered = bool(wanted_status or text or since or until)
        rows: list[dict[str, Any]] = []
        scanned, next_cursor = 0, cursor
        while True:
            page = await self.services.request("trace-list", TraceListRequest(
                user=scope.user, collection=scope.collection, type=kind, limit=limit, cursor=next_cursor))
            scanned += len(page.traces)
            next_cursor = page.next_cursor
            # newest first: a trace older than the range ends the scan; newer ones are passed over
            if since and page.traces and page.traces[-1].time[:10] < since:
                next_cursor = ""
            shown = [t for t in page.traces if (not text or text.casefold() in t.question.casefold())
                     and (not since or t.time[:10] >= since) and (not until or t.time[:10] <= until)]
            status = await trace_statuses(self.services, scope.user, scope.collection, [t.uri for t in shown])
            rows += [{"uri": t.uri, "href": scope.trace(t.uri), "type": t.type, "question": t.question,
                      "time": t.time, "status": status.get(t.uri, "incomplete"),
                      "parent_href": scope.trace(_root_question(t.parent)) if t.parent else None}
                     for t in shown if not wanted_status or status.get(t.uri) == wanted_status]
            if not filtered or len(rows) >= limit or not next_cursor or scanned >= MAX_SCANNED:
                break
        keep = {"type": kind, "status": wanted_status, "q": text, "from": since, "to": until,
                "limit": str(limit) if limit != PAGE_SIZE else None}
        return self._page("list.html", scope=scope, rows=rows, kind=kind, filters=_TYPE_FILTERS,
                          statuses=_STATUS_FILTERS, wanted_status=wanted_status, text=text, since=since, until=until,
                          scanned=scanned if filtered else None,
                          next_href=scope.href("/explorer", cursor=next_cursor, **keep) if next_cursor else None,
                          first_href=scope.href("/explorer", **keep) if cursor else None)

    async def trace_view(self, request: web.Request) -> web.StreamResponse:
        scope = self._scope(request)
        uri = self._question(request)
        read = await read_trace(self.services, scope.user, scope.collection, uri)
        if read is None:
            raise PageError(404, "No such trace", f"no trace {uri} in collection {scope.collection} "
                                                  f"of user {scope.user}")
        trace = read.trace
        edges = (trace.get("focus") or {}).get("selected_edges", [])
        chains = [c for e in edges for c in e.get("sources", [])]
        chains += [c["chain"] for c in (trace.get("exploration") or {}).get("chunks", []) or []]
        chunk_ids = list(dict.fromkeys(link["uri"] for chain in chains for link in chain
                                       if link.get("type") == "chunk"))[:MAX_CHUNK_TEXTS]
        chunk_texts = await trace_documents_text(self.services, scope.user, scope.collection, chunk_ids)
        parent = trace.get("parent")
        otel_id = trace.get("otel_trace_id")
        tracing_href = (self.tracing_ui_url.replace("{trace_id}", otel_id)
                        if self.tracing_ui_url and isinstance(otel_id, str) and OTEL_TRACE_ID.fullmatch(otel_id)
                        else None)
        return self._page("trace.html", scope=scope, trace=trace, edges=edges, drawing=draw_edges(edges),
                          dag=draw_dag(trace) if trace.get("type") == "agent" else None,
                          tracing_href=tracing_href,
                          chunk_texts=chunk_texts,
                          parent_href=scope.trace(_root_question(parent)) if parent else None,
                          permalink=scope.trace(uri), compare_keep=scope.keep,
                          exports={f: scope.href("/explorer/export", uri=uri, format=f) for f in EXPORTS},
                          document_href=lambda doc: scope.href("/explorer/document", id=doc))

    async def compare(self, request: web.Request) -> web.StreamResponse:
        """``?a=…&b=…``: two traces of the same user and collection side by side (:mod:`.compare`)."""
        scope = self._scope(request)
        a, b = self._question(request, "a"), self._question(request, "b")
        reads = [await read_trace(self.services, scope.user, scope.collection, uri, sources=False) for uri in (a, b)]
        for uri, read in zip((a, b), reads, strict=True):
            if read is None:
                raise PageError(404, "No such trace", f"no trace {uri} in collection {scope.collection} "
                                                      f"of user {scope.user}")
        ta, tb = (r.trace for r in reads if r is not None)
        return self._page("compare.html", scope=scope, a=ta, b=tb, a_href=scope.trace(a), b_href=scope.trace(b),
                          diff=compare_traces(ta, tb))

    async def ask_page(self, request: web.Request) -> web.StreamResponse:
        return self._page("ask.html", headers=ASK_HEADERS, scope=self._scope(request), services=ASK_SERVICES)

    async def ask_stream(self, request: web.Request) -> web.StreamResponse:
        """One question, answered as server-sent events: ``stage`` (each explain event: its stage and URI),
        ``answer`` (a piece of the answer), then ``done`` (the trace's link, and the error if the query failed)."""
        scope = self._scope(request)
        if request.headers.get("Sec-Fetch-Site") == "cross-site":
            raise PageError(403, "Not allowed", "a question can be asked from the explorer's own page only")
        service, question = request.query.get("service", "graph-rag"), request.query.get("q", "").strip()
        if service not in ASK_SERVICES:
            raise PageError(400, "Bad service", f"service must be one of {', '.join(ASK_SERVICES)}")
        if not question or len(question) > MAX_QUESTION:
            raise PageError(400, "Bad question", f"a question must have 1 to {MAX_QUESTION:,} characters")
        query: Any
        if service == "graph-rag":
            query = GraphRagQuery(query=question, user=scope.user, collection=scope.collection, streaming=True)
        elif service == "document-rag":
            query = DocumentRagQuery(query=question, user=scope.user, collection=scope.collection, streaming=True)
        else:
            query = AgentRequest(question=question, user=scope.user, collection=scope.collection, streaming=True,
                                 session_id=str(uuid.uuid4()))
        response = web.StreamResponse(headers={**ASK_HEADERS, "Content-Type": "text/event-stream"})
        await response.prepare(request)

        async def send(event: str, data: dict[str, Any]) -> None:
            await response.write(f"event: {event}\ndata: {orjson.dumps(data).decode()}\n\n".encode())

        root, error = "", None
        try:
            async for msg in self.services.stream(service, query):
                if msg.error is not None:
                    error = msg.error.message or msg.error.type
                    break
                if msg.message_type == "explain" and msg.explain_id:
                    parsed = parse_trace_uri(msg.explain_id)
                    root = root or (parsed.question if parsed is not None else "")
                    await send("stage", {"stage": parsed.stage if parsed is not None else "", "uri": msg.explain_id})
                elif service == "agent" and msg.message_type == "answer" and msg.content:
                    await send("answer", {"text": msg.content})
                elif service != "agent" and msg.message_type == "chunk" and msg.response:
                    await send("answer", {"text": msg.response})
        except (ServiceError, RequestTimeout, BackendError) as e:
            error = str(e)
        await send("done", {"trace": root or None, "href": scope.trace(root) if root else None, "error": error})
        await response.write_eof()
        return response

    async def script(self, request: web.Request) -> web.StreamResponse:
        return web.Response(body=self.js, content_type="text/javascript",
                            headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "max-age=3600"})

    async def export(self, request: web.Request) -> web.StreamResponse:
        scope = self._scope(request)
        uri = self._question(request)
        fmt = request.query.get("format", "")
        if fmt not in EXPORTS:
            raise PageError(400, "Bad format", f"format must be one of {', '.join(EXPORTS)}")
        read = await read_trace(self.services, scope.user, scope.collection, uri, sources=fmt == "json")
        if read is None:
            raise PageError(404, "No such trace", f"no trace {uri} in collection {scope.collection} "
                                                  f"of user {scope.user}")
        if fmt == "json":
            body = orjson.dumps(read.trace, option=orjson.OPT_INDENT_2)
        else:
            from trustgraph_base.rdf.export import serialize

            body = serialize(read.triples, fmt, drop_graphs=fmt == "turtle").encode()
        kind, ext = EXPORTS[fmt]
        parsed = parse_trace_uri(uri)
        name = parsed.session if parsed is not None else "trace"
        return web.Response(body=body, content_type=kind, charset="utf-8", headers={
            **SECURITY_HEADERS, "Content-Disposition": f'attachment; filename="trace-{_safe(name)}.{ext}"'})

    async def document(self, request: web.Request) -> web.StreamResponse:
        """A source document of the user's collection, as stored (the document link of a source chain)."""
        scope = self._scope(request)
        uri = request.query.get("id", "")
        candidates = [uri]
        if uri.startswith("urn:document:"):
            candidates.insert(0, urllib.parse.unquote(uri[len("urn:document:"):]))
        client = await self.services.client("librarian")
        for doc in candidates:
            if not doc:
                continue
            meta = await client.request(LibrarianRequest(operation="get-document-metadata", user=scope.user,
                                                         collection=scope.collection, document_id=doc))
            if meta.error is not None or meta.document_metadata is None:
                continue
            content = raise_on_error("librarian", await client.request(LibrarianRequest(
                operation="get-document-content", user=scope.user, collection=scope.collection, document_id=doc)))
            m = meta.document_metadata
            ext = {"application/pdf": ".pdf", "text/html": ".html", "text/markdown": ".md"}.get(m.kind, ".txt")
            return web.Response(body=content.content, headers={
                **SECURITY_HEADERS, "Content-Type": m.kind if "/" in m.kind else "application/octet-stream",
                "Content-Disposition": f'attachment; filename="{_safe(m.title or "document")}{ext}"'})
        raise PageError(404, "No such document", f"no document {uri[:200]} in collection {scope.collection} "
                                                 f"of user {scope.user}")

    async def login_form(self, request: web.Request) -> web.StreamResponse:
        return self._page("login.html", message="", next=_local(request.query.get("next", "/explorer")))

    async def login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        token, target = str(form.get("token", "")), _local(str(form.get("next", "/explorer")))
        try:
            self.auth.principal(token)
        except AccessDenied:
            return self._page("login.html", 401, message="that token is not known", next=target)
        response = web.HTTPSeeOther(target, headers=SECURITY_HEADERS)
        if self.auth.required:
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="Strict", path="/explorer")
        raise response

    async def stylesheet(self, request: web.Request) -> web.StreamResponse:
        return web.Response(body=self.css, content_type="text/css",
                            headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "max-age=3600"})

    async def icon(self, request: web.Request) -> web.StreamResponse:
        return web.Response(body=ICON, content_type="image/svg+xml",
                            headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "max-age=86400"})

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/explorer", self._guarded(self.trace_list)),
                web.get("/explorer/trace", self._guarded(self.trace_view)),
                web.get("/explorer/export", self._guarded(self.export)),
                web.get("/explorer/compare", self._guarded(self.compare)),
                web.get("/explorer/ask", self._guarded(self.ask_page)),
                web.get("/explorer/ask/stream", self._guarded(self.ask_stream)),
                web.get("/explorer/ask.js", self.script),
                web.get("/explorer/document", self._guarded(self.document)),
                web.get("/explorer/login", self.login_form),
                web.post("/explorer/login", self.login),
                web.get("/explorer/explorer.css", self.stylesheet),
                web.get("/explorer/icon.svg", self.icon)]


def _root_question(uri: str) -> str:
    """The Question of the trace a stage belongs to (an agent's Analysis → the agent trace that asked)."""
    trace = parse_trace_uri(uri)
    return trace.question if trace is not None else uri


def _local(target: str) -> str:
    """A redirect target within the explorer only (no other host, no other path)."""
    return target if target.startswith("/explorer") and "//" not in target and "\\" not in target else "/explorer"


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80] or "file"
