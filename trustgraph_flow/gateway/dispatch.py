"""One TrustGraph request to the services and its replies back, whatever carried it (WebSocket or REST).

Flow services (``graph-rag``, ``document-rag``, ``agent``, ``triples``) are streamed: every
service message becomes one :class:`Reply` whose ``complete`` says whether it was the last.
A triples query is always streamed from the service; for a client that did not ask for
streaming its batches are joined into one reply.  ``librarian`` is one call (:mod:`.library`).
Every failure becomes an error reply with a ``type``; nothing raises out of :meth:`Dispatcher.replies`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from trustgraph_base.codec import CodecError
from trustgraph_base.processor import RequestResponseClient, RequestTimeout, ServiceError, raise_on_error
from trustgraph_base.pubsub import BackendError
from trustgraph_base.schema import LibrarianRequest, LibrarianResponse

from .library import Library
from .translate import FLOW_SERVICES, RESPONSES, flow_request, is_complete, response_error
from .wire import GATEWAY_ERROR, REQUEST_ERROR, GatewayRequestError, error_body

log = logging.getLogger(__name__)

#: Every service a request may name.
GATEWAY_SERVICES = FLOW_SERVICES + ("librarian",)


@dataclass
class Reply:
    """One reply to a request: a ``body`` (the frame's ``response``) or an ``error``."""

    body: dict | None = None
    error: dict | None = None
    complete: bool = True


class Dispatcher:
    """Runs requests against the services.

    :param client: the started client of a service, by service name.
    :param flow: the flow this gateway serves (requests naming another flow are refused).
    :param library_collection: where TrustGraph's ``add-document`` stages documents.
    """

    def __init__(self, client: Callable[[str], RequestResponseClient], flow: str,
                 library_collection: str = "default"):
        self.client = client
        self.flow = flow
        self.library = Library(self._librarian, flow, library_collection)

    async def _librarian(self, req: LibrarianRequest) -> LibrarianResponse:
        return raise_on_error("librarian", await self.client("librarian").request(req))

    async def replies(self, user: str, service: Any, flow: Any, body: Any) -> AsyncIterator[Reply]:
        """The replies to one request of ``user`` (an error reply ends them)."""
        try:
            if service == "librarian":
                yield Reply(await self.library.handle(body, user))
                return
            if service not in FLOW_SERVICES:
                raise GatewayRequestError(f"unknown service {str(service)[:60]!r}; this gateway serves "
                                          f"{', '.join(GATEWAY_SERVICES)}")
            if flow not in (None, self.flow):
                raise GatewayRequestError(f"flow {str(flow)[:64]!r} is not served here (this gateway serves "
                                          f"{self.flow!r})", GATEWAY_ERROR)
            request = flow_request(service, body, user)
            stream = self.client(service).stream(request)
            if service == "triples" and not body.get("streaming"):
                quads: list = []
                async for resp in stream:
                    err = response_error(resp)
                    if err:
                        yield Reply(error=err)
                        return
                    quads += RESPONSES[service](resp)["response"]
                yield Reply({"response": quads})
                return
            async for resp in stream:
                err = response_error(resp)
                if err:
                    yield Reply(error=err)
                    return
                yield Reply(RESPONSES[service](resp), complete=is_complete(service, resp))
        except GatewayRequestError as e:
            yield Reply(error=e.wire())
        except ServiceError as e:
            yield Reply(error=error_body(e.error_type, e.message))
        except RequestTimeout as e:
            yield Reply(error=error_body(GATEWAY_ERROR, str(e)))
        except CodecError as e:
            yield Reply(error=error_body(REQUEST_ERROR, f"{service}: {e}"))
        except BackendError as e:
            log.warning("bus failure on a %s request: %s", service, e)
            yield Reply(error=error_body(GATEWAY_ERROR, f"the message bus failed: {e}"))
