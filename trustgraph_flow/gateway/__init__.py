"""api-gateway: TrustGraph 2.11.1's gateway protocol (WebSocket ``/api/v1/socket`` and REST) in front of the services.

Modules, one concept each: :mod:`.wire` (the error a request gets), :mod:`.terms` (RDF terms
and quads, TrustGraph wire JSON <-> this project's dataclasses), :mod:`.translate` (request
keys and responses of the flow services), :mod:`.library` (the librarian operations, which
carry no collection on TrustGraph's side), :mod:`.auth` (tokens, workspaces, bind address),
:mod:`.limits`, :mod:`.dispatch` (one request to the services and back), :mod:`.mux` (the
WebSocket), :mod:`.rest` (REST and its OpenAPI document, :mod:`.openapi`), :mod:`.native` (this
project's own channel, for its ``tg-*`` commands with ``--api-url``), :mod:`.app` (the aiohttp
application) and :mod:`.service` (the ``api-gateway`` and ``tg-gateway`` commands).
The protocol facts it relies on are in ``docs/gateway.md``.
"""
