"""The parts of sending a :class:`~app.client.calls.Call` that the sync and async clients share:
where the server is, the request's arguments, and reading its answer."""

from __future__ import annotations

import os
from typing import Any, TypeVar

import httpx
import msgspec

from app.client.calls import Call
from app.client.errors import error_from_response

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 10.0
"""Seconds to wait for an answer, on top of a long poll's ``wait_seconds``."""

_encoder = msgspec.json.Encoder()


def auth_headers(token: str | None) -> dict[str, str]:
    """The bearer header for ``token``, else ``$SUNDIAL_TOKEN`` (none if neither is set)."""
    chosen = token or os.environ.get("SUNDIAL_TOKEN")
    headers = {"Accept": "application/json", "User-Agent": "sundial-python-client"}
    if chosen:
        headers["Authorization"] = f"Bearer {chosen}"
    return headers


def request_arguments(call: Call[Any], timeout: float) -> dict[str, Any]:
    """Keyword arguments of ``httpx.Client.request`` for ``call``."""
    arguments: dict[str, Any] = {
        "method": call.method,
        "url": call.path,
        "params": call.params or None,
        "timeout": httpx.Timeout(timeout + call.wait_seconds, connect=timeout),
    }
    if call.body is not None:
        arguments["content"] = _encoder.encode(call.body)
        arguments["headers"] = {"Content-Type": "application/json"}
    return arguments


def read_answer(call: Call[T], response: httpx.Response) -> T:
    """The decoded answer, or the API error it carries."""
    if response.is_success:
        return call.decode(response.content)
    raise error_from_response(response)
