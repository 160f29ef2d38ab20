"""The tokens file's one schema: every reader of the file (``serve``, a running server's reload, the
``token`` commands) and every writer (``token add``, ``revoke``, ``profile``) goes through
:func:`parse_tokens`, so a file is either read exactly as written or refused whole.

``{"tokens": [{"subject": "alice", "sha256": "<64 lowercase hex digits>", "read": ["*"], "write": []}]}``:
a subject is a non-empty string without control characters, ``read`` and ``write`` are optional lists of
non-empty pattern strings, ``expires`` an optional UTC time to the second (``2030-01-31T12:00:00Z``) after
which the token is refused. Anything else fails closed with a one-line :class:`TokensFileError` naming the
entry and the field: a string where a list belongs (read character by character it would grant ``*``),
a number, a bool, a short or uppercase sha256, a missing or unknown field, a key given twice in one
object (which of the two counts would be the parser's guess), the same sha256 twice, nesting, a top level
that is not an object, bytes that are not UTF-8.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints, ValidationError

from smart_transfer.config.units import EXPIRY_FORMAT

#: A dataset-name pattern (shell-style; an empty one would match nothing and is a typo).
Pattern = Annotated[str, StringConstraints(min_length=1)]
#: Who a token is for: printed in logs, errors and ``token list``, so one line of printable text.
#: (C0 and C1 controls, line and paragraph separators, and bidi controls that reorder what is shown).
Subject = Annotated[
    str, StringConstraints(min_length=1, pattern=r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]+$")
]
#: The hex SHA-256 of a token, as ``hashlib.sha256(...).hexdigest()`` writes it.
Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]


def _real_time(value: str) -> str:
    datetime.strptime(value, EXPIRY_FORMAT)  # a ValueError for a day or hour that does not exist
    return value


#: When a token stops working: one exact form (UTC, to the second), so every reader reads the same moment.
Expiry = Annotated[
    str, StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$"), AfterValidator(_real_time)
]

#: What a validation error of each kind says about its field (pydantic's own text otherwise).
_SAYS = {
    "missing": "missing",
    "extra_forbidden": "unknown field",
    "list_type": "must be a list of patterns",
    "string_type": "must be a string",
    "string_unicode": "must be valid Unicode text",
    "string_too_short": "must not be empty",
    "model_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
}
_PATTERN_SAYS = {
    "subject": "must be one line of printable text",
    "sha256": "must be 64 lowercase hex digits (the SHA-256 of the token)",
    "expires": "must be a UTC time to the second, like 2030-01-31T12:00:00Z",
}


class TokensFileError(Exception):
    """The tokens file is missing, unreadable or malformed (the message is one line)."""


class TokenEntry(BaseModel):
    """One token of the file: whose it is, its hash, and the dataset patterns it may read and write."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    subject: Subject
    sha256: Sha256
    read: list[Pattern] = []
    write: list[Pattern] = []
    expires: Expiry | None = None

    def expires_at(self) -> datetime | None:
        """The moment the token stops working (None: never)."""
        return datetime.strptime(self.expires, EXPIRY_FORMAT).replace(tzinfo=UTC) if self.expires else None


class TokensDocument(BaseModel):
    """The whole file."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    tokens: list[TokenEntry]


class _Repeats:
    """The JSON objects of one document that give a key twice (their identity locates them)."""

    def __init__(self) -> None:
        self.found: list[tuple[dict[str, Any], str]] = []

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        value = dict(pairs)
        if len(value) != len(pairs):
            keys = [key for key, _ in pairs]
            self.found.append((value, next(key for index, key in enumerate(keys) if key in keys[:index])))
        return value


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")


def parse_tokens(raw: bytes, source: Path | str) -> TokensDocument:
    """The validated document of a tokens file's bytes (``source`` names it in errors)."""
    repeats = _Repeats()
    try:
        document = json.loads(raw.decode("utf-8"), object_pairs_hook=repeats, parse_constant=_refuse_constant)
    except UnicodeDecodeError:
        raise TokensFileError(f"tokens file {source} is malformed: it is not UTF-8 text") from None
    except RecursionError:
        raise TokensFileError(f"tokens file {source} is malformed: it is nested too deeply") from None
    except ValueError as exc:  # json.JSONDecodeError, a refused constant, an integer of too many digits
        raise TokensFileError(f"tokens file {source} is malformed: {_one_line(str(exc))}") from None
    if repeats.found:
        value, key = repeats.found[0]
        raise TokensFileError(f"tokens file {source} is malformed: {_where(document, value)}{key} is given twice")
    try:
        parsed = TokensDocument.model_validate(document)
    except ValidationError as exc:
        raise TokensFileError(f"tokens file {source} is malformed: {_described(document, exc)}") from None
    first: dict[str, int] = {}
    for index, entry in enumerate(parsed.tokens):
        if entry.sha256 in first:
            raise TokensFileError(
                f"tokens file {source} is malformed: {_entry(index, entry.subject)}sha256: the same as entry "
                f"{first[entry.sha256]}'s (one token, two grants)"
            )
        first[entry.sha256] = index
    return parsed


def tokens_bytes(document: TokensDocument) -> bytes:
    """The file's bytes for ``document`` (indented: people read and review it)."""
    fields = document.model_dump(mode="json", exclude_none=True)  # a token without an expiry has no field
    return json.dumps(fields, indent=2, ensure_ascii=False).encode() + b"\n"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _entry(index: int, subject: object) -> str:
    known = f" (subject {subject!r})" if isinstance(subject, str) else ""
    return f"entry {index}{known}: "


def _where(document: object, value: dict[str, Any]) -> str:
    """Where ``value`` (an object of ``document``) sits: the top level, an entry, or deeper."""
    if value is document:
        return "the top level: "
    entries = document.get("tokens") if isinstance(document, dict) else None
    for index, entry in enumerate(entries if isinstance(entries, list) else []):
        if entry is value:
            return _entry(index, value.get("subject"))
    return "a nested object: "


def _described(document: object, exc: ValidationError) -> str:
    """The first error of ``exc``: which entry (index and subject when known), which field, what is wrong."""
    error = exc.errors()[0]
    location = list(error["loc"])
    if location[:1] != ["tokens"] or len(location) < 2:
        return f"the top level: {_problem(error['type'], error['msg'], location)}"
    index = int(location[1])
    entries = document["tokens"] if isinstance(document, dict) else None
    entry = entries[index] if isinstance(entries, list) else None
    subject = entry.get("subject") if isinstance(entry, dict) else None
    return _entry(index, subject) + _problem(error["type"], error["msg"], location[2:])


def _problem(kind: str, message: str, location: list[int | str]) -> str:
    """``field[index]: what is wrong`` (or only what is wrong, for the value itself)."""
    says = _SAYS.get(kind, _one_line(message))
    if not location:
        return says
    if kind in ("string_pattern_mismatch", "value_error"):
        says = _PATTERN_SAYS.get(str(location[0]), says)
    if kind == "list_type" and location == ["tokens"]:
        says = "must be a list of entries"
    return str(location[0]) + "".join(f"[{part}]" for part in location[1:]) + f": {says}"


def new_entry(
    subject: str, sha256: str, read: list[str], write: list[str], expires: datetime | None = None
) -> TokenEntry:
    """An entry to add, checked by the same schema (TokensFileError naming the field it refuses)."""
    fields: dict[str, Any] = {"subject": subject, "sha256": sha256, "read": read, "write": write}
    if expires is not None:
        fields["expires"] = expires.astimezone(UTC).strftime(EXPIRY_FORMAT)
    try:
        return TokenEntry.model_validate(fields)
    except ValidationError as exc:
        error = exc.errors()[0]
        problem = _problem(error["type"], error["msg"], list(error["loc"]))
        raise TokensFileError(f"cannot add a token for {subject!r}: {problem}") from None
