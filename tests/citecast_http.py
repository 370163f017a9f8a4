"""An HTTP client wired to a CiteCast app in-process: httpx's mock transport hands each request
to the app's one transport-independent entry point (:meth:`CiteCastApp.respond`, or its 413 for a
body above the limit), so tests speak HTTP without a socket, a thread or a web framework."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

from rap_benchmark.citecast.client import HttpClient
from rap_benchmark.citecast.env import CiteCastEnv
from rap_benchmark.citecast.server import CiteCastApp


def http_client(env: CiteCastEnv, api_key: str | None = None, keys: Mapping[str, str] | None = None) -> HttpClient:
    app = CiteCastApp(env, keys)

    def handle(request: httpx.Request) -> httpx.Response:
        body = request.read()
        if len(body) > app.max_body_bytes:
            status, payload = app.too_large(len(body))
        else:
            auth = request.headers.get("authorization")
            status, payload = app.respond(
                request.method, request.url.path, request.url.query, None if auth is None else auth.encode(), body
            )
        return httpx.Response(status, content=payload, headers={"content-type": "application/json"})

    transport = httpx.Client(base_url="http://testserver", transport=httpx.MockTransport(handle))
    return HttpClient("http://testserver", http=transport, api_key=api_key)
