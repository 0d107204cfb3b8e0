"""Chat completion against any OpenAI-compatible endpoint, with our own retry policy.

The openai client's built-in retries are switched off so that every failure goes through
one place: 408/409/429/5xx and connection errors are retried with exponential backoff and
jitter (honouring ``Retry-After``) up to ``max_retries`` times, everything else fails at
once, and whatever escapes is an :class:`LlmError` that names the endpoint (base URL and
model) and the cause. ``timeout`` is the deadline of one whole call, retries included, so
a caller knows the worst case; a timeout error names the setting to raise.

A call given up on is cancelled at the server: :meth:`OpenAICompletion.complete` streams
internally (``stream_completions``), so a timeout or a cancelled caller closes the HTTP
connection, which is what makes servers such as llama.cpp stop generating (a server that is
not told keeps working on the abandoned request, and later requests queue behind it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import re
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any

from trustgraph_base import telemetry
from trustgraph_base.telemetry import genai
from trustgraph_base.telemetry.tracing import AttributeValue

from ..llm_settings import DEFAULT_MAX_RETRIES, DEFAULT_MAX_TOKENS, DEFAULT_TIMEOUT, TIMEOUT_HINT
from ..prompts.templates import TERMS_CAPABILITY, without_terms

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gpt-4o-mini"
#: Seconds the endpoint's model list may take to answer whether it reads the prompts' terms block.
MODELS_PROBE_TIMEOUT = 10.0
RETRYABLE_STATUS = frozenset({408, 409, 429})
#: A request validation error reported as a server error (pydantic's message naming a field of the body).
_REQUEST_VALIDATION = re.compile(r"validation error.*\(?['\"]body['\"],", re.DOTALL)


@dataclass(frozen=True)
class Completion:
    """A finished completion: the text, token usage and model name.

    ``in_token``/``out_token`` are None when the endpoint reported no usage (llama.cpp's server sends none with
    a streamed answer): unknown, never 0, so that a trace does not claim a call cost nothing.
    """

    text: str
    in_token: int | None
    out_token: int | None
    model: str
    finish_reason: str = ""  # why the model stopped (``stop``, ``length``, ...), as the endpoint said


@dataclass(frozen=True)
class CompletionChunk:
    """One piece of a streamed completion; the last one has ``end_of_stream`` and the usage."""

    text: str
    end_of_stream: bool = False
    in_token: int | None = None
    out_token: int | None = None
    model: str | None = None
    finish_reason: str | None = None


def _usage_counts(usage: Any) -> tuple[int | None, int | None]:
    """``(prompt_tokens, completion_tokens)`` of an endpoint's usage object; None for a count it did not send
    (a real 0 stays 0)."""
    def count(name: str) -> int | None:
        value = getattr(usage, name, None) if usage is not None else None
        return None if value is None else int(value)

    return count("prompt_tokens"), count("completion_tokens")


@dataclass
class _StreamState:
    """What a streamed answer's chunks say besides their text: the model, the usage (None until a chunk
    carries it) and the finish reason (empty until one is given)."""

    model: str | None = None
    in_token: int | None = None
    out_token: int | None = None
    finish_reason: str = ""

    def read(self, chunk: Any) -> list[str]:
        """Note what ``chunk`` says and return its text pieces."""
        self.model = getattr(chunk, "model", None) or self.model
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.in_token, self.out_token = _usage_counts(usage)
        pieces = []
        for choice in getattr(chunk, "choices", None) or []:
            self.finish_reason = getattr(choice, "finish_reason", None) or self.finish_reason
            piece = getattr(choice.delta, "content", None) if choice.delta else None
            if piece:
                pieces.append(piece)
        return pieces


class LlmError(Exception):
    """A completion call failed; ``retryable`` says whether trying again later may help."""

    def __init__(self, endpoint: str, reason: str, retryable: bool, status: int | None = None) -> None:
        """Build the error.

        :param endpoint: base URL and model, e.g. ``http://127.0.0.1:8000/v1 (model extractive)``.
        :param reason: what went wrong, e.g. ``HTTP 500 server error: boom (after 4 attempts)``.
        :param retryable: True for rate limits, server errors, connection errors and timeouts.
        :param status: HTTP status when there was one.
        """
        super().__init__(f"LLM endpoint {endpoint} failed: {reason}")
        self.endpoint = endpoint
        self.reason = reason
        self.retryable = retryable
        self.status = status


class OpenAICompletion:
    """Async text completion client for an OpenAI-compatible ``/v1/chat/completions`` endpoint."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        *,
        temperature: float = 0.0,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        backoff_initial: float = 0.5,
        backoff_max: float = 10.0,
        stream_usage: bool = True,
        seed: int | None = None,
        stream_completions: bool = True,
    ) -> None:
        """Configure the endpoint; unset arguments come from the environment.

        :param base_url: endpoint base URL, e.g. ``http://127.0.0.1:8000/v1`` (``OPENAI_BASE_URL``).
        :param api_key: API key (``OPENAI_API_KEY``); keyless local servers get a placeholder.
        :param model: model name (``OPENAI_MODEL``, default gpt-4o-mini).
        :param temperature: default sampling temperature, 0..2.
        :param max_tokens: default completion length limit.
        :param timeout: seconds allowed for one whole call including retries (for streams: to
            open the stream, then between two chunks).
        :param max_retries: retries after the first attempt on retryable failures.
        :param backoff_initial: first backoff delay in seconds; doubles each retry.
        :param backoff_max: ceiling of one backoff delay (and of a honoured Retry-After).
        :param stream_usage: ask for a usage chunk when streaming (``stream_options.include_usage``).
        :param seed: seed of the jitter generator (tests); None = random.
        :param stream_completions: :meth:`complete` streams internally, so that a call given up on
            closes its connection and the server stops generating; False sends one plain request.
        """
        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if self.base_url is None and self.api_key is None:
            raise ValueError(
                "no LLM endpoint configured: pass base_url/api_key or set OPENAI_BASE_URL / OPENAI_API_KEY"
            )
        self.model = model or os.environ.get("OPENAI_MODEL") or DEFAULT_MODEL
        if not 0.0 <= temperature <= 2.0:
            raise ValueError(f"temperature must be within 0..2, got {temperature}")
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.stream_usage = stream_usage
        self.stream_completions = stream_completions
        self._random = random.Random(seed)
        self._clients: dict[int, Any] = {}
        #: whether the endpoint's model list declares TERMS_CAPABILITY (None: not known yet)
        self._reads_terms: bool | None = None

    # ---------------------------------------------------------------- helpers
    @property
    def model_id(self) -> str:
        """The configured model name (the endpoint may report a more specific one)."""
        return self.model

    @property
    def endpoint(self) -> str:
        """Base URL and model, as named in every error."""
        return f"{self.base_url or 'default OpenAI endpoint'} (model {self.model})"

    def _client(self) -> Any:
        """One AsyncOpenAI per event loop (its connection pool is bound to the loop)."""
        loop_key = id(asyncio.get_running_loop())
        client = self._clients.get(loop_key)
        if client is None:
            import openai

            client = openai.AsyncOpenAI(
                base_url=self.base_url,
                api_key=self.api_key or "unused",
                max_retries=0,
                timeout=self.timeout,
            )
            self._clients = {loop_key: client}
        return client

    async def aclose(self) -> None:
        """Close the HTTP connections of this loop's client."""
        clients, self._clients = self._clients, {}
        for client in clients.values():
            with contextlib.suppress(Exception):  # closing a client of a loop that has gone
                await client.close()

    async def __aenter__(self) -> OpenAICompletion:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _request(self, system: str, prompt: str, temperature: float | None, max_tokens: int | None,
                 response_format: dict | None = None) -> dict:
        messages = []
        if system:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": prompt})
        temperature = self.temperature if temperature is None else temperature
        if not 0.0 <= temperature <= 2.0:
            raise ValueError(f"temperature must be within 0..2, got {temperature}")
        max_tokens = self.max_tokens if max_tokens is None else max_tokens
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        request = {"model": self.model, "messages": messages, "temperature": temperature, "max_tokens": max_tokens}
        if response_format is not None:  # structured output (model/prompts/structured.py)
            request["response_format"] = response_format
        return request

    async def _as_sent(self, client: Any, request: dict, remaining: float) -> dict:
        """``request`` as this endpoint is sent it: a prompt's terms block (:mod:`..prompts.templates`) is
        removed unless the endpoint's ``/v1/models`` list declares :data:`TERMS_CAPABILITY`, which only the
        project's test server does; a model is sent the readable prompt alone."""
        if self._reads_terms is None:
            self._reads_terms = await self._ask_reads_terms(client, remaining)
        if self._reads_terms:
            return request
        messages = [{**m, "content": without_terms(m["content"])} if m["role"] == "user" else m
                    for m in request["messages"]]
        return {**request, "messages": messages}

    async def _ask_reads_terms(self, client: Any, remaining: float) -> bool | None:
        """Whether the endpoint's model list declares :data:`TERMS_CAPABILITY`; None when it could not be
        asked (connection failed, timed out), so that the next attempt asks again."""
        import openai

        try:
            page = await client.models.list(timeout=max(min(remaining, MODELS_PROBE_TIMEOUT), 0.1))
        except (openai.APIConnectionError, TimeoutError):  # timeouts included
            return None
        except (openai.APIError, ValueError):
            return False  # the endpoint answered, with no (readable) model list: it reads what a model reads
        cards = getattr(page, "data", None) or []
        return any((getattr(card, "model_extra", None) or {}).get(TERMS_CAPABILITY) is True for card in cards)

    def _timed_out(self) -> str:
        return f"timed out after {self.timeout:g}s ({TIMEOUT_HINT})"

    def _classify(self, exc: BaseException) -> LlmError:
        """Turn any failure of one attempt into an LlmError with a precise reason."""
        import openai

        if isinstance(exc, LlmError):
            return exc
        if isinstance(exc, (TimeoutError, openai.APITimeoutError)):
            return LlmError(self.endpoint, self._timed_out(), retryable=True)
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            # llama-cpp-python's server answers a request its validation refuses with HTTP 500 ("1 validation
            # error: ... ('body', ...)"): the request is at fault, so asking again cannot help
            invalid_request = status >= 500 and _REQUEST_VALIDATION.search(str(exc.message)) is not None
            retryable = (status in RETRYABLE_STATUS or status >= 500) and not invalid_request
            kind = "rate limited" if status == 429 else (
                "server error" if status >= 500 and not invalid_request else "request rejected")
            return LlmError(self.endpoint, f"HTTP {status} {kind}: {exc.message}", retryable, status)
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = f"{type(cause).__name__}: {cause}" if cause else str(exc)
            return LlmError(self.endpoint, f"connection error: {detail}", retryable=True)
        if isinstance(exc, openai.OpenAIError):
            return LlmError(self.endpoint, f"{type(exc).__name__}: {exc}", retryable=False)
        return LlmError(self.endpoint, f"malformed response: {type(exc).__name__}: {exc}", retryable=False)

    def backoff_delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt + 1``.

        A server's ``Retry-After`` wins (capped at ``backoff_max``); otherwise the delay is
        exponential, ``backoff_initial * 2**attempt`` capped at ``backoff_max``, with equal
        jitter (uniform in its upper half) so that clients do not retry in lockstep.

        :param attempt: 0 for the first retry.
        :param retry_after: the server's Retry-After in seconds, if any.
        """
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.backoff_max)
        ceiling = min(self.backoff_max, self.backoff_initial * (2 ** attempt))
        return ceiling / 2 + self._random.uniform(0, ceiling / 2)

    def _backoff(self, attempt: int, exc: BaseException) -> float:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        retry_after = None
        if headers is not None:
            try:
                retry_after = float(headers.get("retry-after", ""))
            except ValueError:
                retry_after = None
        return self.backoff_delay(attempt, retry_after)

    async def _with_retries(self, call: Any, deadline: float, what: str) -> Any:
        """Run ``call(remaining_seconds)`` until it succeeds, fails for good, or the deadline passes."""
        loop = asyncio.get_running_loop()
        attempt = 0
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise LlmError(self.endpoint, self._timed_out(), retryable=True)
            try:
                async with asyncio.timeout(remaining):
                    return await call(remaining)
            except Exception as exc:
                error = self._classify(exc)
                attempts = attempt + 1
                out_of_time = loop.time() >= deadline
                if not error.retryable or attempt >= self.max_retries or out_of_time:
                    if attempts > 1:
                        error = LlmError(
                            error.endpoint, f"{error.reason} (after {attempts} attempts)",
                            error.retryable, error.status,
                        )
                    raise error from exc
                delay = self._backoff(attempt, exc)
                if loop.time() + delay >= deadline:
                    raise LlmError(
                        self.endpoint,
                        f"{error.reason} (after {attempts} attempts; no time left to retry within {self.timeout:g}s; "
                        f"{TIMEOUT_HINT})",
                        error.retryable, error.status,
                    ) from exc
                log.warning(
                    "%s to %s: attempt %d failed (%s); retrying in %.2fs",
                    what, self.endpoint, attempts, error.reason, delay,
                )
                await asyncio.sleep(delay)
                attempt += 1

    # ------------------------------------------------------------------- API
    async def complete(
        self, system: str, prompt: str, *, temperature: float | None = None, max_tokens: int | None = None,
        response_format: dict | None = None,
    ) -> Completion:
        """Run one chat completion and return its text, usage and model.

        :param system: system message ("" for none).
        :param prompt: user message.
        :param temperature: override of the default temperature.
        :param max_tokens: override of the default completion length limit.
        :param response_format: the request's ``response_format`` (structured output), if any.
        :raises LlmError: the endpoint failed for good, or the deadline passed.
        """
        request = self._request(system, prompt, temperature, max_tokens, response_format)
        client = self._client()
        deadline = asyncio.get_running_loop().time() + self.timeout

        with telemetry.span(f"chat {self.model}", kind="client", attributes=self._span_attributes(request)) as span:
            async def attempt(remaining: float) -> Completion:
                sent = await self._as_sent(client, request, remaining)
                # each attempt records what it sends: a retry may differ when the model list was not read before
                genai.set_inputs(span, sent["messages"])
                if self.stream_completions:
                    return await self._streamed_completion(client, sent, remaining)
                response = await client.chat.completions.create(**sent, timeout=remaining)
                return self._to_completion(response)

            c: Completion = await self._with_retries(attempt, deadline, "completion")
            genai.set_response(span, model=c.model, input_tokens=c.in_token, output_tokens=c.out_token,
                               finish_reason=c.finish_reason, output=c.text)
        return c

    async def _streamed_completion(self, client: Any, request: dict, remaining: float) -> Completion:
        """One attempt of :meth:`complete` as a stream read to its end; the stream is closed however the
        attempt ends (timed out, cancelled, failed), so the server learns that nobody waits any more."""
        import openai

        extra = {"stream_options": {"include_usage": True}} if self.stream_usage else {}
        try:
            response_stream = await client.chat.completions.create(**request, stream=True, timeout=remaining,
                                                                   **extra)
        except openai.BadRequestError as exc:
            if not extra or "stream_options" not in str(exc):
                raise
            # Some servers reject stream_options: this client asks without it from now on.
            self.stream_usage = False
            response_stream = await client.chat.completions.create(**request, stream=True, timeout=remaining)
        pieces: list[str] = []
        state = _StreamState()
        try:
            async for chunk in response_stream:
                pieces.extend(state.read(chunk))
        finally:
            with contextlib.suppress(Exception):  # best effort when the connection already broke
                await response_stream.close()
        if not state.finish_reason:
            raise self._cut_short()
        return Completion(text="".join(pieces), in_token=state.in_token, out_token=state.out_token,
                          model=state.model or self.model, finish_reason=state.finish_reason)

    def _cut_short(self) -> LlmError:
        """A stream that ended without a finish reason: the server cut the answer short.  llama-cpp-python's
        server does so, with a well-formed end, to a stream when another request arrives (unless started
        with ``--interrupt_requests False``); retrying asks again."""
        return LlmError(self.endpoint, "the answer was cut short: the stream ended without a finish reason "
                                       "(a llama-cpp-python server interrupts a stream when another request "
                                       "arrives unless started with --interrupt_requests False)", retryable=True)

    def _span_attributes(self, request: dict) -> dict[str, AttributeValue]:
        """The GenAI attributes of a call's span (docs/observability.md); {} when tracing is off.  The input
        messages are left out: each attempt records them as sent (:meth:`_as_sent` may drop the terms block)."""
        if not telemetry.enabled():
            return {}
        return genai.request_attributes("chat", "openai", self.model, temperature=request["temperature"],
                                        max_tokens=request["max_tokens"])

    def _to_completion(self, response: Any) -> Completion:
        choices = getattr(response, "choices", None)
        if not choices:
            raise LlmError(self.endpoint, "malformed response: no choices", retryable=False)
        text = choices[0].message.content or ""
        in_token, out_token = _usage_counts(getattr(response, "usage", None))
        return Completion(
            text=text,
            in_token=in_token,
            out_token=out_token,
            model=getattr(response, "model", None) or self.model,
            finish_reason=str(getattr(choices[0], "finish_reason", "") or ""),
        )

    async def stream(
        self, system: str, prompt: str, *, temperature: float | None = None, max_tokens: int | None = None
    ) -> AsyncIterator[CompletionChunk]:
        """Stream a chat completion: text pieces, then a final chunk with usage and model.

        Opening the stream is retried like :meth:`complete`; once text has been yielded a
        failure is raised as LlmError (never retried, the caller already has part of the text).

        :param system: system message ("" for none).
        :param prompt: user message.
        :param temperature: override of the default temperature.
        :param max_tokens: override of the default completion length limit.
        :raises LlmError: the endpoint failed, or no chunk arrived within ``timeout`` seconds.
        """
        request = self._request(system, prompt, temperature, max_tokens)
        client = self._client()
        loop = asyncio.get_running_loop()
        include_usage = self.stream_usage
        # An async generator shares its caller's context, so its span is not made current (tracing.start_span).
        span = telemetry.start_span(f"chat {self.model}", kind="client", attributes=self._span_attributes(request))

        async def attempt(remaining: float) -> Any:
            nonlocal include_usage
            extra = {"stream_options": {"include_usage": True}} if include_usage else {}
            sent = await self._as_sent(client, request, remaining)
            genai.set_inputs(span, sent["messages"])  # as in complete(): what this attempt sends
            try:
                return await client.chat.completions.create(**sent, stream=True, timeout=remaining, **extra)
            except Exception as exc:
                import openai

                # Some servers reject stream_options: try once more without it.
                if include_usage and isinstance(exc, openai.BadRequestError) and "stream_options" in str(exc):
                    include_usage = False
                    return await client.chat.completions.create(**sent, stream=True, timeout=remaining)
                raise

        error: BaseException | None = None
        try:
            async with contextlib.aclosing(self._stream(attempt, loop, span)) as chunks:
                async for chunk in chunks:
                    yield chunk
        except BaseException as e:
            error = e if not isinstance(e, GeneratorExit) else None
            raise
        finally:
            telemetry.end_span(span, error)

    async def _stream(self, attempt: Any, loop: asyncio.AbstractEventLoop,
                      span: Any) -> AsyncGenerator[CompletionChunk, None]:
        response_stream = await self._with_retries(attempt, loop.time() + self.timeout, "streaming completion")
        state = _StreamState()
        pieces: list[str] = []  # the completion's text, kept for its span only when the user opted in
        keep = span is not None and genai.capture_content()
        iterator = response_stream.__aiter__()
        try:
            while True:
                try:
                    async with asyncio.timeout(self.timeout):
                        chunk = await iterator.__anext__()
                except StopAsyncIteration:
                    break
                except Exception as exc:
                    error = self._classify(exc)
                    if isinstance(exc, TimeoutError):
                        error = LlmError(
                            self.endpoint, f"stream stalled: no chunk within {self.timeout:g}s ({TIMEOUT_HINT})",
                            retryable=True,
                        )
                    raise error from exc
                for piece in state.read(chunk):
                    if keep:
                        pieces.append(piece)
                    yield CompletionChunk(text=piece)
        finally:
            with contextlib.suppress(Exception):  # best effort when the connection already broke
                await response_stream.close()
        if not state.finish_reason:
            raise self._cut_short()
        model = state.model or self.model
        genai.set_response(span, model=model, input_tokens=state.in_token, output_tokens=state.out_token,
                           finish_reason=state.finish_reason, output="".join(pieces) if keep else None)
        yield CompletionChunk(
            text="", end_of_stream=True, in_token=state.in_token, out_token=state.out_token, model=model,
            finish_reason=state.finish_reason or None,
        )
