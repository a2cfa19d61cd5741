"""The bodies of API v1 as msgspec Structs, and their conversions to and from app.core.models:
one module per resource, as the routes (:mod:`app.api.routes`) and the service
(:mod:`app.core.service`) are split, over the bases of :mod:`.common`.

Request structs forbid unknown fields and are decoded strictly (:mod:`app.api.body`): ``"1"`` or
``1.5`` where an integer is expected is a 400 naming the field. Message payloads are
:class:`msgspec.Raw` both ways: the JSON text the producer sent is stored and returned as is,
never parsed or re-encoded in Python. Ranges and cross-field rules are the core's
(:mod:`app.core.validation`); these types only fix the JSON shapes. Datetimes are RFC 3339.
"""
