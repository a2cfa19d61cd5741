"""What PostgreSQL's ``jsonb`` makes of a JSON text, worked out without a database: whether it
can hold every number in it, how much longer the numbers come back than they were written, and
how deeply the text nests.

``jsonb`` keeps numbers as ``numeric``, which holds at most 131072 digits before the decimal
point and 16383 after it, and writes them out in full when it returns them: ``1e3`` comes back
as ``1000`` and ``1e-3`` as ``0.001``, so a short number with a large exponent is a long one once
stored.

Both questions are asked of every payload, so the answers come from what runs in C (bytes
methods, msgspec's parser), in steps that stop as soon as the answer is known: a payload without
a digit-``e``-digit sequence (nor a run of 16384 digits) holds no number that can grow, and one
with few brackets cannot nest deeply. Only then is it parsed, or its strings set aside (the
text is JSON that an edge has parsed, so a backslash only ever starts an escape inside a string
and any other quote opens or closes one), and Python looks at each number with an exponent.
"""

from __future__ import annotations

import re

import msgspec

NUMERIC_MAX_WHOLE_DIGITS = 131072
"""Digits before the decimal point ``numeric`` holds (a weight of 32767 base-10000 digits)."""

NUMERIC_MAX_SCALE = 16383
"""Digits after the decimal point ``numeric`` holds (its display scale has 14 bits)."""

_EXPONENT_LIMIT = (2**31 - 1) // 2
"""PostgreSQL refuses an exponent of this magnitude or more before anything else."""

# Every digit as 0, every exponent mark as e, every sign as +: then "0e0" or "0e+" is where a
# number may have an exponent, and a run of zeros a long number.
_CLASSES = bytes.maketrans(b"0123456789eE+-", b"0000000000ee++")
_LONG_RUN = b"0" * (NUMERIC_MAX_SCALE + 1)
# Brackets (all as [ and ]) and quotes only.
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_STRUCTURE = bytes(set(range(256)) - set(b'[]{}"'))
_STRING = re.compile(rb'"[^"]*"')
# A JSON number (its exponent, if any, as group 1).
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?([eE][+-]?[0-9]+)?")


class UnstorableNumberError(ValueError):
    """A number of the text is beyond what ``numeric`` holds."""

    def __init__(self, number: str) -> None:
        if len(number) > 40:
            number = f"{number[:20]}…{number[-12:]} ({len(number)} characters)"
        super().__init__(number)
        self.number = number


def number_growth(text: bytes) -> int:
    """How many bytes longer the numbers of the JSON ``text`` come back from ``jsonb`` than they
    are written (negative when they shrink). Only numbers with an exponent (or of more than
    16383 characters) are looked at: the others come back as written, but for a negative zero
    (``-0`` is returned as ``0``), so the answer may be a byte or so too large, never too small.

    Raises:
        UnstorableNumberError: a number is beyond what ``numeric`` holds.
    """
    if not _may_matter(text):
        return 0
    growth = 0
    for literal in _looked_at(text):
        stored = stored_length(literal)
        if stored is None:
            raise UnstorableNumberError(literal)
        growth += stored - len(literal)
    return growth


def _may_matter(text: bytes) -> bool:
    """Whether ``text`` may hold a number with an exponent, or a very long one."""
    classes = text.translate(_CLASSES)
    return b"0e0" in classes or b"0e+" in classes or _LONG_RUN in classes


def _looked_at(text: bytes) -> list[str]:
    """The number literals of ``text`` with an exponent or of more than 16383 characters.

    msgspec's parser hands every literal with a fraction or an exponent to a hook as written;
    integers it reads itself (one too long for it to read fails, and the literals are then
    found in the text without its strings).
    """
    found: list[str] = []

    def keep(literal: str) -> None:
        if "e" in literal or "E" in literal or len(literal) > NUMERIC_MAX_SCALE:
            found.append(literal)

    try:
        msgspec.json.Decoder(float_hook=keep).decode(text)
    except (msgspec.DecodeError, RecursionError, ValueError):
        outside = _STRING.sub(b"", _without_escapes(text)).decode("ascii", "replace")
        return [
            m.group(0)
            for m in _NUMBER.finditer(outside)
            if m.group(1) or len(m.group(0)) > NUMERIC_MAX_SCALE
        ]
    return found


def _without_escapes(text: bytes) -> bytes:
    """``text`` with every escaped backslash and escaped quote blanked (same length), so that
    every quote left opens or closes a string."""
    return text.replace(b"\\\\", b"__").replace(b'\\"', b"__")


def stored_length(literal: str) -> int | None:
    """The length of the JSON number ``literal`` as ``jsonb`` returns it, or None when
    ``numeric`` cannot hold it (the rules of PostgreSQL's ``numeric_in``)."""
    mantissa, mark, exponent = literal.replace("E", "e").partition("e")
    negative = mantissa.startswith("-")
    whole, _, fraction = mantissa.lstrip("-").partition(".")
    shift = 0
    if mark:
        if len(exponent.lstrip("+-").lstrip("0")) > 10:
            return None
        shift = int(exponent)
        if not -_EXPONENT_LIMIT < shift < _EXPONENT_LIMIT:
            return None
    scale = max(0, len(fraction) - shift)
    if scale > NUMERIC_MAX_SCALE:
        return None
    point = 1 + scale if scale else 0  # the point and the digits after it
    significant = whole.lstrip("0")
    if significant:
        before = len(significant) + shift  # digits before the point, from the first nonzero
    else:
        rest = fraction.lstrip("0")
        if not rest:
            return 1 + point  # zero: no sign, one digit before the point
        before = shift - (len(fraction) - len(rest))
    if before > NUMERIC_MAX_WHOLE_DIGITS:
        return None
    return negative + max(before, 1) + point


def deeper_than(text: bytes, limit: int) -> bool:
    """Whether the JSON ``text`` nests arrays and objects more than ``limit`` levels deep."""
    if text.count(b"[") + text.count(b"{") <= limit:
        return False
    # The brackets and quotes alone; a string without brackets is then "" (dropped at once),
    # the few holding some go one by one. Dropping "" where one string ends and the next
    # begins is as good: nothing lies between them.
    structure = _without_escapes(text).translate(_BRACKETS, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in structure:
        structure = _STRING.sub(b"", structure)
    return not _nests_at_most(structure, limit)


def _nests_at_most(brackets: bytes, limit: int) -> bool:
    """Whether ``brackets`` (only [ and ]) nest at most ``limit`` deep: each round removes the
    innermost pairs, so brackets ``limit`` deep are gone after ``limit`` rounds."""
    for _ in range(limit):
        if not brackets:
            return True
        brackets = brackets.replace(b"[]", b"")
    return not brackets
