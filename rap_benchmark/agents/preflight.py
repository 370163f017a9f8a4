"""Before the first unit: is the OpenAI-compatible endpoint there, and does it serve the model?

A run against an endpoint that never answers would otherwise retry every unit, record
``backend_error`` for all of them and look like a finished run. ``GET {base_url}/models`` (the
route every OpenAI-compatible server has: vLLM, SGLang, llama.cpp, Ollama, OpenAI) is asked
once per endpoint; a refusal is one line naming the endpoint and what is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from rap_benchmark.core.errors import InputError

DEFAULT_TIMEOUT_S = 10.0


def served_models(base_url: str, api_key: str | None, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> list[str] | None:
    """The model ids ``base_url`` serves; None when it answers but has no usable ``/models``
    listing (some proxies do not implement it). Raises InputError when it cannot be reached or
    refuses the key."""
    url = base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        resp = httpx.get(url, headers=headers, timeout=timeout_s, follow_redirects=True)
    except httpx.HTTPError as exc:
        raise InputError(
            f"cannot reach {base_url} ({type(exc).__name__}: {exc or 'no answer'}); is the server up?"
        ) from exc
    if resp.status_code in (401, 403):
        raise InputError(f"{base_url} refused the API key (HTTP {resp.status_code} on GET /models); see --api-key-env")
    if resp.status_code != 200:
        return None
    try:
        data = resp.json().get("data")
        return [str(m["id"]) for m in data]
    except (ValueError, AttributeError, KeyError, TypeError):
        return None


def check_endpoints(
    base_urls: Sequence[str], model: str, api_key: str | None, *, timeout_s: float = DEFAULT_TIMEOUT_S
) -> None:
    """Refuse (InputError) an endpoint that cannot be reached or does not list ``model``."""
    for base_url in base_urls:
        ids = served_models(base_url, api_key, timeout_s=timeout_s)
        if ids is not None and model not in ids:
            listed = ", ".join(ids[:8]) + (", ..." if len(ids) > 8 else "") if ids else "nothing"
            raise InputError(
                f"{base_url} does not serve model {model!r} (GET /models lists: {listed}); see --served-model"
            )
