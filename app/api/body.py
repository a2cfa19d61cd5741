"""Request bodies: strict msgspec decoding straight from the received bytes.

Litestar's own body handling parses JSON into Python objects and then converts them leniently
(``"1"`` would become ``1``) and it would parse message payloads; so handlers read the raw body
and decode it here, with one cached strict decoder per request type. Payloads stay raw JSON
(:class:`msgspec.Raw`). Every decoding problem becomes a :class:`ValidationError` naming the field
the way the API names fields (``messages[3].priority``).
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec
from litestar import Request

from app.core.errors import ValidationError

T = TypeVar("T")

BODY_FIELD = "body"
"""The ``details.field`` of errors about the body as a whole (not JSON, not an object)."""

_AT = re.compile(r"^(?P<text>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_NAMED = re.compile(r"(?:missing required|unknown) field `(?P<name>[^`]*)`")


_DECODERS: dict[Any, msgspec.json.Decoder[Any]] = {}


def _decoder(kind: type[Any]) -> msgspec.json.Decoder[Any]:
    decoder = _DECODERS.get(kind)
    if decoder is None:
        decoder = _DECODERS[kind] = msgspec.json.Decoder(kind)
    return decoder


def field_name(path: str) -> str:
    """msgspec's error path (``.messages[3].priority``, after the ``$``) as an API field name.

    Dict values show as ``[...]`` in msgspec paths (``.metadata[...]``, ``.metadata[...][0]``
    within a dequeue filter's list): the key is not known, so the API names the dict.
    """
    return path.split("[...]", 1)[0].lstrip(".")


def validation_error(error: msgspec.ValidationError) -> ValidationError:
    """The core error for a msgspec validation error, naming the offending field."""
    match = _AT.match(str(error))
    assert match is not None  # the pattern matches any text
    text, path = match["text"], field_name(match["path"] or "")
    named = _NAMED.search(text)
    if named:
        path = f"{path}.{named['name']}" if path else named["name"]
    return ValidationError(path or BODY_FIELD, text)


def decode(body: bytes, kind: type[T]) -> T:
    """Decode a JSON body into ``kind``; an empty body counts as ``{}``.

    Raises:
        ValidationError: the body is not valid UTF-8 JSON, or does not fit ``kind``.
    """
    if not body or body.isspace():
        body = b"{}"
    try:
        if not body.isascii():
            body.decode()  # msgspec.Raw keeps payload bytes unchecked: refuse bad UTF-8 here
        result: T = _decoder(kind).decode(body)
    except msgspec.ValidationError as error:
        raise validation_error(error) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as error:
        raise ValidationError(BODY_FIELD, f"is not valid JSON: {error}") from None
    except RecursionError:
        raise ValidationError(BODY_FIELD, "is nested too deeply") from None
    return result


async def read(request: Request[Any, Any, Any], kind: type[T]) -> T:
    """Read the request body (within the size limit) and :func:`decode` it into ``kind``."""
    return decode(await request.body(), kind)
