"""A local OpenAI-compatible HTTP server: the project's LLM endpoint for tests and offline demos.

It speaks enough of the OpenAI API for the real ``openai`` client: ``GET /v1/models``,
``POST /v1/chat/completions`` (plain and SSE streaming, with a usage chunk when
``stream_options.include_usage`` is set) and ``POST /v1/embeddings`` (float or base64
encoding), with OpenAI-shaped error bodies. It binds 127.0.0.1 only.

Answers come from one of two modes:

* ``extractive``: the prompt's ``task: <id>`` line and ``<data>`` JSON block (see
  :mod:`trustgraph_flow.model.prompts.templates`) are parsed back and answered by
  :class:`~trustgraph_flow.model.prompts.ExtractivePrompter`, so the whole openai-client
  code path runs with deterministic answers;
* ``scripted``: replies given by the test, in order, per template id, or by a callable.

A ``response_format`` whose JSON schema has an ``edges`` property (the kg-edge-selection schema, in
OpenAI's ``json_schema`` shape or llama.cpp's ``json_object`` + ``schema`` shape) is honoured in
extractive mode by answering ``{"edges": [...]}``; :meth:`LocalOpenAIServer.reject_response_format`
makes the server refuse any ``response_format`` with HTTP 400, to test the fallback.

Tests inject faults (latency, HTTP errors, hangs, slow generation, cut streams, malformed output) and
read the request log to assert what the client actually sent. Chat answers share one generation
slot, as a llama.cpp server with one slot does: a slow generation (``slow_next``) holds it, so
later requests wait behind it, until it ends or its client disconnects, which the server
notices and records (``disconnects``). "Tokens" in usage are whitespace-separated
word counts: there is no tokenizer behind this server.
"""

from __future__ import annotations

import base64
import itertools
import json
import logging
import select
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ..extractive import DESCRIPTION as EXTRACTIVE_DESCRIPTION
from ..extractive import MODEL_ID as EXTRACTIVE_MODEL_ID
from ..prompts.templates import JSONL, TERMS_CAPABILITY, PromptError, get_template, parse_rendered

log = logging.getLogger(__name__)

MODES = ("extractive", "scripted")
CHAT = "chat"
EMBEDDINGS = "embeddings"
MODELS = "models"
MALFORMED_WRAPPER = (
    "Here is the answer you asked for:\n```jsonl\n{content}\n"
    '{{"id": "broken", "reasoning": \n["not", "an", "object"]\n```'
)
#: How many JSONL lines :data:`MALFORMED_WRAPPER` adds that a parser must drop.
MALFORMED_EXTRA_LINES = 3

Script = list | dict | Callable[[str | None, Any, list], str]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw it."""

    method: str
    path: str
    body: Any
    template_id: str | None
    received_at: float


@dataclass(frozen=True)
class Disconnect:
    """A slow generation whose client went away before it finished: the server stopped it."""

    template_id: str | None
    after_seconds: float  # how long it had been generating
    at: float  # time.time() when the server noticed


@dataclass
class Fault:
    """A fault applied to the next matching request(s)."""

    kind: str  # "status" | "hang" | "slow" | "cut" | "malformed"
    endpoint: str = CHAT
    status: int = 500
    message: str = ""
    retry_after: float | None = None
    seconds: float = 30.0
    text: str | None = None


class _HttpError(Exception):
    def __init__(self, status: int, message: str, *, kind: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.code = code
        self.headers = headers or {}


def _error_type(status: int) -> tuple[str, str | None]:
    if status == 401:
        return "authentication_error", "invalid_api_key"
    if status == 404:
        return "invalid_request_error", "not_found"
    if status == 429:
        return "rate_limit_error", "rate_limit_exceeded"
    if status >= 500:
        return "server_error", None
    return "invalid_request_error", None


def _schema_of(response_format: Any) -> dict | None:
    """The JSON schema a ``response_format`` asks for: OpenAI's ``json_schema`` shape or llama.cpp's
    ``json_object`` with a ``schema`` (None: no schema)."""
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
    elif response_format.get("type") == "json_object":
        schema = response_format.get("schema")
    else:
        return None
    return schema if isinstance(schema, dict) else None


def _word_count(text: str) -> int:
    return len(text.split())


def _message_text(content: Any) -> str:
    """Text of a chat message content (a string or a list of ``{"type": "text"}`` parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


@dataclass
class _State:
    mode: str
    script: Script | None
    latency_ms: float
    model: str
    api_key: str | None
    prompter: Any
    embedder: Any
    reject_response_format: bool | str = False
    #: streamed answers carry no usage even when asked (llama-cpp-python's server ignores include_usage)
    omit_stream_usage: bool = False
    #: the model list declares TERMS_CAPABILITY, so clients keep the prompts' terms block (extractive mode needs it)
    declare_terms: bool = True
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)
    faults: list[Fault] = field(default_factory=list)
    log: list[RecordedRequest] = field(default_factory=list)
    disconnects: list[Disconnect] = field(default_factory=list)
    #: The one generation slot chat answers share (a llama.cpp server with one slot).
    slot: threading.Lock = field(default_factory=threading.Lock)
    script_position: int = 0
    template_positions: dict[str, int] = field(default_factory=dict)
    ids: Any = field(default_factory=lambda: itertools.count(1))


class LocalOpenAIServer:
    """Handle of a running server: ``base_url``, request log, fault injection, ``stop()``."""

    def __init__(self, state: _State, httpd: ThreadingHTTPServer) -> None:
        self._state = state
        self._httpd = httpd
        self.port: int = httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.model = state.model
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name=f"openai-testserver-{self.port}",
            daemon=True,
        )
        self._thread.start()

    # ------------------------------------------------------------- inspection
    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far (a copy)."""
        with self._state.lock:
            return list(self._state.log)

    def chat_requests(self) -> list[RecordedRequest]:
        """The chat-completion requests received so far."""
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def template_ids(self) -> list[str | None]:
        """The template id of each chat request, in order (None when the prompt had none)."""
        return [r.template_id for r in self.chat_requests()]

    @property
    def disconnects(self) -> list[Disconnect]:
        """The slow generations stopped because their client disconnected (a copy)."""
        with self._state.lock:
            return list(self._state.disconnects)

    def clear_log(self) -> None:
        """Forget the recorded requests."""
        with self._state.lock:
            self._state.log.clear()

    # ------------------------------------------------------------------ faults
    def fail_next(self, count: int = 1, status: int = 500, message: str = "", *,
                  retry_after: float | None = None, endpoint: str = CHAT) -> None:
        """Answer the next ``count`` matching requests with HTTP ``status`` and an OpenAI error body.

        :param count: number of requests affected.
        :param status: HTTP status (429, 500, 503, ...).
        :param message: error message (a default names the injected fault).
        :param retry_after: value of a ``Retry-After`` header in seconds.
        :param endpoint: ``"chat"``, ``"embeddings"`` or ``"models"`` (the model list).
        """
        self._add(count, Fault("status", endpoint, status=status, retry_after=retry_after,
                               message=message or f"injected fault: HTTP {status}"))

    def hang_next(self, count: int = 1, seconds: float = 30.0, *, endpoint: str = CHAT) -> None:
        """Let the next ``count`` matching requests hang ``seconds`` (or until stop), then drop them.

        :param count: number of requests affected.
        :param seconds: how long to hold each request before closing the connection unanswered.
        :param endpoint: ``"chat"``, ``"embeddings"`` or ``"models"`` (the model list).
        """
        self._add(count, Fault("hang", endpoint, seconds=seconds))

    def slow_next(self, count: int = 1, seconds: float = 30.0) -> None:
        """Let the next ``count`` chat requests generate for ``seconds`` before answering, holding the
        server's one generation slot: other chat requests wait for it, as they do behind a busy
        llama.cpp slot.  A generation whose client disconnects stops at once and is recorded in
        :attr:`disconnects`; the slot is free again.

        :param count: number of requests affected.
        :param seconds: how long each one generates.
        """
        self._add(count, Fault("slow", CHAT, seconds=seconds))

    def cut_next(self, count: int = 1) -> None:
        """End the next ``count`` streamed chat answers after half their text with ``data: [DONE]`` and no
        finish reason, as llama-cpp-python's server does to a stream when another request arrives (its
        default ``interrupt_requests``).  Plain (not streamed) answers are not affected but use the fault up.

        :param count: number of requests affected.
        """
        self._add(count, Fault("cut", CHAT))

    def malform_next(self, count: int = 1, text: str | None = None) -> None:
        """Corrupt the next ``count`` chat answers.

        Without ``text``, the real answer is wrapped in :data:`MALFORMED_WRAPPER`: a chatter
        line, a code fence, a truncated JSON line and a non-object line (a JSONL parser keeps
        the real lines and drops :data:`MALFORMED_EXTRA_LINES`). With ``text``, the answer
        is replaced by it.

        :param count: number of requests affected.
        :param text: replacement answer.
        """
        self._add(count, Fault("malformed", CHAT, text=text))

    def reject_response_format(self, reject: bool | str = True) -> None:
        """Answer every chat request that carries ``response_format`` with HTTP 400 naming it (as servers that do
        not support structured output do), or stop doing so.

        :param reject: True to reject, False to honour it again, ``"llama"`` to reject as llama-cpp-python 0.3.36
            does: any shape but ``text`` and ``json_object`` with HTTP 500 and pydantic's validation message.
        """
        self._state.reject_response_format = reject

    def declare_terms(self, declare: bool = True) -> None:
        """List models with (True) or without (False) :data:`TERMS_CAPABILITY`, i.e. be sent the prompts' terms
        block or, like any model server, the readable prompt alone.  A client asks once, on its first call.

        :param declare: False to look like a model server to clients that have not asked yet.
        """
        self._state.declare_terms = declare

    def omit_stream_usage(self, omit: bool = True) -> None:
        """Send streamed answers without a usage chunk even when ``stream_options.include_usage`` asks for one, as
        llama-cpp-python's server does, or send it again.  Plain (not streamed) answers keep their usage.

        :param omit: True to omit the usage of streamed answers, False to send it again.
        """
        self._state.omit_stream_usage = omit

    def set_latency(self, latency_ms: float) -> None:
        """Delay every chat and embeddings answer by ``latency_ms`` milliseconds."""
        self._state.latency_ms = latency_ms

    def clear_faults(self) -> None:
        """Remove pending faults."""
        with self._state.lock:
            self._state.faults.clear()

    def _add(self, count: int, fault: Fault) -> None:
        if fault.endpoint not in (CHAT, EMBEDDINGS, MODELS):
            raise ValueError(f"endpoint must be {CHAT!r}, {EMBEDDINGS!r} or {MODELS!r}, got {fault.endpoint!r}")
        with self._state.lock:
            self._state.faults.extend([fault] * count)

    # --------------------------------------------------------------- lifecycle
    def stop(self) -> None:
        """Stop serving, release hanging requests and close the socket (idempotent)."""
        if self._state.stopping.is_set():
            return
        self._state.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LocalOpenAIServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as real model servers (uvicorn, vLLM, llama.cpp) set it: without it each small
    # write after the headers waits for the client's delayed ACK (Nagle), so a streamed answer
    # begins late in most requests, depending on the connection's ACK timing (bench/README.md).
    disable_nagle_algorithm = True
    server_version = "trustgraph-openai-testserver/1"
    timeout = 60  # idle keep-alive connections are dropped after a minute
    state: _State  # set on the per-server subclass
    _template_id: str | None = None  # of the chat request being answered

    def log_message(self, format: str, *args: Any) -> None:  # signature of the base class
        log.debug("%s %s", self.address_string(), format % args)

    # --------------------------------------------------------------- plumbing
    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _send_error(self, error: _HttpError) -> None:
        kind, code = _error_type(error.status)
        payload = {"error": {"message": error.message, "type": error.kind or kind, "param": None,
                             "code": error.code or code}}
        self._send_json(error.status, payload, error.headers)

    def _read_json(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw or b"null")
        except ValueError as exc:
            raise _HttpError(400, f"request body is not valid JSON: {exc}") from None

    def _record(self, body: Any, template_id: str | None) -> None:
        with self.state.lock:
            self.state.log.append(RecordedRequest(self.command, self.path, body, template_id, time.time()))

    def _check_auth(self) -> None:
        expected = self.state.api_key
        if expected is not None and self.headers.get("Authorization") != f"Bearer {expected}":
            raise _HttpError(401, "Incorrect API key provided.")

    def _take_fault(self, endpoint: str) -> Fault | None:
        with self.state.lock:
            for index, fault in enumerate(self.state.faults):
                if fault.endpoint == endpoint:
                    return self.state.faults.pop(index)
        return None

    def _apply_delay_and_faults(self, endpoint: str) -> Fault | None:
        """Sleep the configured latency; raise, hang or generate slowly for an injected fault; return a malformed
        or cut one (the answer changes)."""
        if self.state.latency_ms:
            self.state.stopping.wait(self.state.latency_ms / 1000)
        fault = self._take_fault(endpoint)
        if endpoint == CHAT and (fault is None or fault.kind != "slow"):
            self._wait_for_slot()
        if fault is None:
            return None
        if fault.kind == "slow":
            self._generate_slowly(fault.seconds)
            return None
        return self._raise_fault(fault)

    def _raise_fault(self, fault: Fault) -> Fault:
        """Raise a status or hang fault; return any other (it changes the answer)."""
        if fault.kind == "status":
            headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else None
            raise _HttpError(fault.status, fault.message, headers=headers)
        if fault.kind == "hang":
            self.state.stopping.wait(fault.seconds)
            raise _HangUpError()
        return fault

    def _wait_for_slot(self) -> None:
        """Wait until no slow generation holds the generation slot (or the server stops)."""
        while not self.state.slot.acquire(timeout=0.05):
            if self.state.stopping.is_set():
                raise _HangUpError()
        self.state.slot.release()

    def _generate_slowly(self, seconds: float) -> None:
        """Hold the generation slot for ``seconds``; stop early, and record it, when the client disconnects."""
        state = self.state
        with state.slot:
            started = time.monotonic()
            while time.monotonic() - started < seconds:
                if state.stopping.is_set():
                    raise _HangUpError()
                if self._client_gone(0.05):
                    with state.lock:
                        state.disconnects.append(Disconnect(self._template_id, time.monotonic() - started,
                                                            time.time()))
                    raise _HangUpError()

    def _client_gone(self, wait: float) -> bool:
        """Whether the client closed its end of the connection (it sends nothing while it waits for an answer)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], wait)
            if not readable:
                return False
            return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    # ----------------------------------------------------------------- routing
    def do_GET(self) -> None:
        self._dispatch(self._get)

    def do_POST(self) -> None:
        self._dispatch(self._post)

    def _dispatch(self, handler: Callable[[], None]) -> None:
        try:
            handler()
        except _HttpError as error:
            self._send_error_safely(error)
        except (_HangUpError, BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # a server bug must still answer in OpenAI shape
            log.exception("test server failed on %s %s", self.command, self.path)
            self._send_error_safely(_HttpError(500, f"internal error: {type(exc).__name__}: {exc}"))

    def _send_error_safely(self, error: _HttpError) -> None:
        try:
            self._send_error(error)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _get(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        self._record(None, None)
        self._check_auth()
        models = [self.state.model, self._embedding_model_id()]
        if path == "/v1/models" or path.startswith("/v1/models/"):
            fault = self._take_fault(MODELS)  # no latency: the listing is not a generation
            if fault is not None:
                self._raise_fault(fault)
        if path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [self._model_card(m, self.state.declare_terms)
                                                             for m in models]})
            return
        if path.startswith("/v1/models/"):
            name = path[len("/v1/models/"):]
            if name in models:
                self._send_json(200, self._model_card(name, self.state.declare_terms))
                return
            raise _HttpError(404, f"The model '{name}' does not exist")
        raise _HttpError(404, f"Unknown request URL: GET {self.path}")

    def _post(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/chat/completions":
            self._chat()
        elif path == "/v1/embeddings":
            self._embeddings()
        else:
            self._record(None, None)
            raise _HttpError(404, f"Unknown request URL: POST {self.path}")

    @staticmethod
    def _model_card(name: str, declare_terms: bool) -> dict:
        card = {"id": name, "object": "model", "created": 0, "owned_by": "trustgraph-explain"}
        if declare_terms:  # the client keeps the prompts' terms block, which extractive mode answers from
            card[TERMS_CAPABILITY] = True
        return card

    def _embedding_model_id(self) -> str:
        embedder = self.state.embedder
        if embedder is not None:
            return embedder.model_id
        from ..embeddings.local import LOCAL_MODEL_ID

        return LOCAL_MODEL_ID

    # -------------------------------------------------------------------- chat
    def _chat(self) -> None:
        try:
            body = self._read_json()
        except _HttpError:
            self._record(None, None)
            raise
        messages = body.get("messages") if isinstance(body, dict) else None
        system = "\n".join(_message_text(m.get("content")) for m in messages or []
                           if isinstance(m, dict) and m.get("role") in ("system", "developer"))
        users = [_message_text(m.get("content")) for m in messages or [] if isinstance(m, dict)
                 and m.get("role") == "user"]
        template_id, terms = parse_rendered(system, users[-1] if users else "")
        self._template_id = template_id
        self._record(body, template_id)
        self._check_auth()
        if not isinstance(messages, list) or not messages:
            raise _HttpError(400, "'messages' must be a non-empty list")
        response_format = body.get("response_format") or {}
        if response_format and self.state.reject_response_format == "llama":
            if response_format.get("type") not in ("text", "json_object"):
                # llama-cpp-python 0.3.36's answer to a shape it does not know: pydantic's error, as a server error
                raise _HttpError(500, "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
                                      "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", "
                                      f"'input': {response_format.get('type')!r}}}")
        elif response_format and self.state.reject_response_format:
            raise _HttpError(400, "Unsupported parameter: 'response_format' is not supported by this server "
                                  "(the test server was told to reject it)")
        fault = self._apply_delay_and_faults(CHAT)
        cut = fault is not None and fault.kind == "cut"
        if cut:
            fault = None
        content, objects = self._answer(template_id, terms, messages)
        if fault is not None:
            content = fault.text if fault.text is not None else MALFORMED_WRAPPER.format(content=content)
        schema = _schema_of(response_format)
        if schema is not None and objects is not None and fault is None \
                and "edges" in (schema.get("properties") or {}):
            content = json.dumps({"edges": objects})  # the kg-edge-selection schema (model/prompts/structured.py)
        elif isinstance(response_format, dict) and response_format.get("type") == "json_object" and fault is None:
            content = json.dumps({"objects": objects} if objects is not None else {"text": content})
        model = EXTRACTIVE_MODEL_ID if self.state.mode == "extractive" else str(body.get("model") or self.state.model)
        prompt_tokens = sum(_word_count(_message_text(m.get("content"))) for m in messages if isinstance(m, dict))
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": _word_count(content),
                 "total_tokens": prompt_tokens + _word_count(content)}
        completion_id = f"chatcmpl-{next(self.state.ids)}"
        created = int(time.time())
        fingerprint = EXTRACTIVE_MODEL_ID if self.state.mode == "extractive" else "scripted"
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage")) \
                and not self.state.omit_stream_usage
            self._stream(completion_id, created, model, fingerprint, content, usage if include_usage else None,
                         cut=cut)
            return
        self._send_json(200, {
            "id": completion_id, "object": "chat.completion", "created": created, "model": model,
            "system_fingerprint": fingerprint,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": usage,
        })

    def _answer(self, template_id: str | None, terms: Any, messages: list) -> tuple[str, list | None]:
        """The reply text (and JSONL objects when there are some) for the current mode."""
        state = self.state
        if state.mode == "extractive":
            if template_id is None:
                raise _HttpError(400, "extractive mode needs a prompt rendered from a project template: "
                                      "no 'task: <template-id>' line found")
            if terms is None:
                raise _HttpError(400, f"extractive mode: the {template_id!r} prompt has no <data> JSON object")
            try:
                result = state.prompter.run_sync(template_id, terms)
            except PromptError as exc:
                raise _HttpError(400, str(exc)) from None
            return result.text, (result.objects if get_template(template_id).response_type == JSONL else None)
        return self._scripted(template_id, terms, messages), None

    def _scripted(self, template_id: str | None, terms: Any, messages: list) -> str:
        state = self.state
        script = state.script
        if callable(script):
            reply = script(template_id, terms, messages)
            if not isinstance(reply, str):
                raise _HttpError(500, f"scripted reply must be a string, got {type(reply).__name__}")
            return reply
        with state.lock:
            if isinstance(script, dict):
                replies = script.get(template_id) if template_id is not None else None
                if replies is None:
                    replies = script.get("*")
                if isinstance(replies, str):
                    return replies
                if isinstance(replies, list):
                    key = template_id if template_id is not None and template_id in script else "*"
                    position = state.template_positions.get(key, 0)
                    if position < len(replies):
                        state.template_positions[key] = position + 1
                        return str(replies[position])
                raise _HttpError(500, f"scripted server: no reply left for template {template_id!r}")
            if isinstance(script, list) and state.script_position < len(script):
                state.script_position += 1
                return str(script[state.script_position - 1])
        raise _HttpError(500, "scripted server: the script is exhausted")

    def _stream(self, completion_id: str, created: int, model: str, fingerprint: str, content: str,
                usage: dict | None, cut: bool = False) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def event(choices: list, extra: dict | None = None) -> None:
            payload = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                       "system_fingerprint": fingerprint, "choices": choices}
            if usage is not None:
                payload["usage"] = None
            payload.update(extra or {})
            self._chunk(f"data: {json.dumps(payload)}\n\n")

        event([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        pieces = [content[i:i + 16] for i in range(0, len(content), 16)]
        for piece in pieces[:(len(pieces) + 1) // 2] if cut else pieces:
            event([{"index": 0, "delta": {"content": piece}, "finish_reason": None}])
        if not cut:  # a cut stream ends at once, well formed but with no finish reason and no usage
            event([{"index": 0, "delta": {}, "finish_reason": "stop"}])
            if usage is not None:
                event([], {"usage": usage})
        self._chunk("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _chunk(self, text: str) -> None:
        data = text.encode()
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    # -------------------------------------------------------------- embeddings
    def _embeddings(self) -> None:
        try:
            body = self._read_json()
        except _HttpError:
            self._record(None, None)
            raise
        self._record(body, None)
        self._check_auth()
        if not isinstance(body, dict):
            raise _HttpError(400, "request body must be a JSON object")
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise _HttpError(400, "'input' must be a string or a non-empty list of strings "
                                  "(token-id input is not supported)")
        encoding = body.get("encoding_format") or "float"
        if encoding not in ("float", "base64"):
            raise _HttpError(400, f"encoding_format must be 'float' or 'base64', got {encoding!r}")
        self._apply_delay_and_faults(EMBEDDINGS)
        embedder = self._embedder()
        dimensions = body.get("dimensions")
        if dimensions is not None and dimensions != embedder.dimension:
            raise _HttpError(400, f"this server's model has {embedder.dimension} dimensions, not {dimensions}")
        vectors = embedder.embed(texts)
        data = []
        for index, vector in enumerate(vectors):
            if encoding == "base64":
                import numpy as np

                value: Any = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()
            else:
                value = vector
            data.append({"object": "embedding", "index": index, "embedding": value})
        tokens = sum(_word_count(t) for t in texts)
        self._send_json(200, {"object": "list", "data": data, "model": embedder.model_id,
                              "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})

    def _embedder(self) -> Any:
        state = self.state
        with state.lock:
            if state.embedder is None:
                from ..embeddings import get_embedder

                state.embedder = get_embedder("local")
            return state.embedder


class _HangUpError(Exception):
    """Raised to leave a request unanswered after an injected hang."""


def start_server(
    mode: str = "extractive",
    script: Script | None = None,
    latency_ms: float = 0,
    port: int = 0,
    *,
    model: str | None = None,
    embedder: Any = None,
    prompter: Any = None,
    api_key: str | None = None,
) -> LocalOpenAIServer:
    """Start the server on 127.0.0.1 in a background thread and return its handle.

    :param mode: ``"extractive"`` (answers from the extractive algorithms) or ``"scripted"``.
    :param script: scripted replies: a list consumed in order; a dict ``{template id | "*":
        reply or list of replies}``; or a callable ``(template_id, terms, messages) -> str``.
    :param latency_ms: delay added to every chat and embeddings answer.
    :param port: TCP port (0 = a free one).
    :param model: model name listed by ``/v1/models`` (default ``extractive`` / ``scripted``).
    :param embedder: Embedder for ``/v1/embeddings`` (default: the shared local one, loaded on
        first use); the extractive answers use it too when given.
    :param prompter: an ExtractivePrompter to answer with (default: one using ``embedder``).
    :param api_key: when set, requests must carry ``Authorization: Bearer <api_key>``.
    :raises ValueError: unknown mode, or scripted mode without a script.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "scripted" and script is None:
        raise ValueError("scripted mode needs a script (list, dict or callable)")
    if mode == "extractive" and prompter is None:
        from ..prompts.prompter import ExtractivePrompter

        prompter = ExtractivePrompter(embedder)
    state = _State(
        mode=mode, script=script, latency_ms=latency_ms, model=model or (EXTRACTIVE_MODEL_ID if mode == "extractive"
                                                                           else "scripted"),
        api_key=api_key, prompter=prompter, embedder=embedder,
    )
    handler = type("BoundHandler", (_Handler,), {"state": state})
    httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
    httpd.daemon_threads = True
    server = LocalOpenAIServer(state, httpd)
    if mode == "extractive":
        log.info("OpenAI-compatible test server at %s: %s", server.base_url, EXTRACTIVE_DESCRIPTION)
    else:
        log.info("OpenAI-compatible test server at %s: scripted replies", server.base_url)
    return server
