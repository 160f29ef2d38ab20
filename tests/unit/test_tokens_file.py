"""The tokens file's one schema: a file is read exactly as written or refused whole, with one line naming
the entry and the field; a running server's Authorizer refuses every token while its file is malformed,
says so once per change of the file, and serves the fixed file again."""

from __future__ import annotations

import json
import logging
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from smart_transfer.server.auth import (
    TOKENS_FILE_UNUSABLE,
    Access,
    AuthError,
    Authorizer,
    Grant,
    TokenExpired,
    add_token,
    hash_token,
    load_grants,
    revoke_tokens,
)
from smart_transfer.server.tokens_file import TokensFileError, parse_tokens

SHA = hash_token("st_secret")
OTHER_SHA = hash_token("st_other")


def _doc(**entry: Any) -> bytes:
    return json.dumps({"tokens": [{"subject": "reader", "sha256": SHA, **entry}]}).encode()


def _entry_without(key: str) -> bytes:
    entry = {"subject": "reader", "sha256": SHA, "read": ["x"]}
    del entry[key]
    return json.dumps({"tokens": [entry]}).encode()


# (document, what the one line must say)
MALFORMED: dict[str, tuple[bytes, str]] = {
    "string read grant": (_doc(read="fp-*"), "entry 0 (subject 'reader'): read: must be a list of patterns"),
    "string write grant": (_doc(write="*"), "entry 0 (subject 'reader'): write: must be a list of patterns"),
    "number subject": (_doc(subject=7), "entry 0: subject: must be a string"),
    "bool subject": (_doc(subject=True), "entry 0: subject: must be a string"),
    "empty subject": (_doc(subject=""), "entry 0 (subject ''): subject: must not be empty"),
    "subject of two lines": (_doc(subject="a\nb"), "subject: must be one line of printable text"),
    "subject with a C1 control": (_doc(subject="a\x85b"), "subject: must be one line of printable text"),
    "subject with a line separator": (_doc(subject="a\u2028b"), "subject: must be one line of printable text"),
    "subject with a bidi override": (_doc(subject="a\u202eb"), "subject: must be one line of printable text"),
    "short sha256": (_doc(sha256=SHA[:40]), "entry 0 (subject 'reader'): sha256: must be 64 lowercase hex digits"),
    "long sha256": (_doc(sha256=SHA + "0"), "sha256: must be 64 lowercase hex digits"),
    "uppercase sha256": (_doc(sha256=SHA.upper()), "sha256: must be 64 lowercase hex digits"),
    "sha256 and a newline": (_doc(sha256=SHA + "\n"), "sha256: must be 64 lowercase hex digits"),
    "number sha256": (_doc(sha256=12), "sha256: must be a string"),
    "missing subject": (_entry_without("subject"), "entry 0: subject: missing"),
    "missing sha256": (_entry_without("sha256"), "entry 0 (subject 'reader'): sha256: missing"),
    "unknown key": (_doc(admin=True), "entry 0 (subject 'reader'): admin: unknown field"),
    "bool pattern": (_doc(read=[True]), "read[0]: must be a string"),
    "number pattern": (_doc(read=["a", 1]), "read[1]: must be a string"),
    "empty pattern": (_doc(read=[""]), "read[0]: must not be empty"),
    "null grant": (_doc(read=None), "read: must be a list of patterns"),
    "bool grant": (_doc(write=True), "write: must be a list of patterns"),
    "object grant": (_doc(read={"*": True}), "read: must be a list of patterns"),
    "nested list grant": (_doc(read=[["*"]]), "read[0]: must be a string"),
    "entry not an object": (b'{"tokens": ["reader"]}', "entry 0: must be a JSON object"),
    "tokens not a list": (b'{"tokens": {"0": {}}}', "the top level: tokens: must be a list of entries"),
    "tokens null": (b'{"tokens": null}', "tokens: must be a list of entries"),
    "no tokens key": (b"{}", "the top level: tokens: missing"),
    "unknown top-level key": (b'{"tokens": [], "admins": ["*"]}', "the top level: admins: unknown field"),
    "top level a list": (b"[]", "the top level: must be a JSON object"),
    "top level a string": (b'"tokens"', "the top level: must be a JSON object"),
    "top level a number": (b"1", "the top level: must be a JSON object"),
    "key given twice in an entry": (
        b'{"tokens": [{"subject": "reader", "sha256": "%s", "read": ["x"], "read": ["*"]}]}' % SHA.encode(),
        "entry 0 (subject 'reader'): read is given twice",
    ),
    "key given twice at the top": (b'{"tokens": [], "tokens": []}', "the top level: tokens is given twice"),
    "same sha256 twice": (
        json.dumps(
            {
                "tokens": [
                    {"subject": "a", "sha256": SHA, "read": ["x"]},
                    {"subject": "b", "sha256": SHA, "write": ["*"]},
                ]
            }
        ).encode(),
        "entry 1 (subject 'b'): sha256: the same as entry 0's",
    ),
    "not UTF-8": (b'{"tokens": [{"subject": "r\xe9ader"}]}', "it is not UTF-8 text"),
    "UTF-16": ('{"tokens": []}'.encode("utf-16"), "it is not UTF-8 text"),
    "lone surrogate": (_doc(subject="\ud800"), "subject: must be valid Unicode text"),
    "NaN": (b'{"tokens": [], "n": NaN}', "NaN is not JSON"),
    "truncated": (b'{"tokens": [', "is malformed: Expecting value"),
    "empty file": (b"", "is malformed: Expecting value"),
    "expires with an offset": (_doc(expires="2030-01-31T12:00:00+00:00"), "expires: must be a UTC time to the second"),
    "expires a date only": (_doc(expires="2030-01-31"), "expires: must be a UTC time to the second"),
    "expires on a day that does not exist": (_doc(expires="2030-02-30T00:00:00Z"), "expires: must be a UTC time"),
    "expires a number": (_doc(expires=1893456000), "entry 0 (subject 'reader'): expires: must be a string"),
    "nested too deeply": (b'{"tokens": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_tokens_file_is_refused_with_one_line_naming_entry_and_field(case: str, tmp_path: Path) -> None:
    raw, says = MALFORMED[case]
    tokens = tmp_path / "tokens.json"
    tokens.write_bytes(raw)
    with pytest.raises(TokensFileError) as refused:
        load_grants(tokens)
    message = str(refused.value)
    assert message.startswith(f"tokens file {tokens} is malformed: ") and says in message, message
    assert "\n" not in message
    with pytest.raises(TokensFileError):  # a server given it never starts ...
        Authorizer.from_file(tokens)
    for change in (lambda: add_token(tokens, "new", ["*"], []), lambda: revoke_tokens(tokens, "reader")):
        with pytest.raises(TokensFileError):  # ... and the token commands change nothing
            change()
        assert tokens.read_bytes() == raw


def test_the_string_grant_that_read_character_by_character_held_a_star_grants_nothing(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_bytes(json.dumps({"tokens": [{"subject": "reader", "sha256": SHA, "read": "fp-*"}]}).encode())
    with pytest.raises(TokensFileError, match="read: must be a list of patterns"):
        load_grants(tokens)


def test_a_well_formed_file_is_read_exactly_as_written(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    tokens.write_bytes(
        json.dumps(
            {
                "tokens": [
                    {"subject": "alice", "sha256": SHA, "read": ["*"], "write": ["sales-*", "x?"]},
                    {"subject": "bob", "sha256": OTHER_SHA},
                ]
            }
        ).encode()
    )
    assert load_grants(tokens) == [
        Grant("alice", SHA, ("*",), ("sales-*", "x?")),
        Grant("bob", OTHER_SHA, (), ()),
    ]


def test_an_expired_token_is_refused_saying_when_and_one_not_yet_expired_is_admitted(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    add_token(tokens, "never", ["*"], [])
    later = add_token(tokens, "later", ["*"], [], expires=datetime.now(UTC) + timedelta(hours=1))
    document = json.loads(tokens.read_bytes())
    assert "expires" not in document["tokens"][0] and document["tokens"][1]["expires"].endswith("Z")
    document["tokens"].append({"subject": "gone", "sha256": SHA, "read": ["*"], "expires": "2020-01-01T00:00:00Z"})
    tokens.write_bytes(json.dumps(document).encode())
    authorizer = Authorizer.from_file(tokens)
    grant = authorizer.check(f"Bearer {later}", "x", Access.READ)
    assert grant is not None and grant.expires_at is not None and 3500 < (grant.seconds_left() or 0) <= 3600
    with pytest.raises(TokenExpired, match=r"^this token expired at 2020-01-01T00:00:00Z$") as refused:
        authorizer.check("Bearer st_secret", "x", Access.READ)
    assert refused.value.status == 401


def test_token_add_refuses_a_subject_or_pattern_the_file_could_not_hold(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.json"
    add_token(tokens, "keep", ["*"], [])
    before = tokens.read_bytes()
    for subject, read, says in (
        ("a\nb", ["*"], "subject: must be one line"),
        ("", ["*"], "subject: must not be empty"),
    ):
        with pytest.raises(TokensFileError, match=re.escape(says)):
            add_token(tokens, subject, read, [])
    with pytest.raises(TokensFileError, match=re.escape("read[1]: must not be empty")):
        add_token(tokens, "c", ["x", ""], [])
    assert tokens.read_bytes() == before


def _replace(path: Path, content: bytes) -> None:
    """Replace the file by a rename, as an editor or `token add` does (a new inode: the reload sees it)."""
    temp = path.with_name(path.name + ".new")
    temp.write_bytes(content)
    temp.replace(path)


def test_a_running_authorizer_refuses_every_token_while_its_file_is_malformed_and_logs_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    tokens = tmp_path / "tokens.json"
    alice = add_token(tokens, "alice", ["*"], [])
    good = tokens.read_bytes()
    authorizer = Authorizer.from_file(tokens)
    assert authorizer.check(f"Bearer {alice}", "other", Access.READ) == Grant("alice", hash_token(alice), ("*",))

    broken = good.replace(b'[\n        "*"\n      ]', b'"*"')
    assert broken != good
    _replace(tokens, broken)
    with caplog.at_level(logging.INFO, logger="smart_transfer.server.auth"):
        for _ in range(5):
            with pytest.raises(AuthError) as refused:
                authorizer.check(f"Bearer {alice}", "other", Access.READ)
            assert refused.value.status == 401 and str(refused.value) == TOKENS_FILE_UNUSABLE
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "read: must be a list of patterns" in errors[0].getMessage()
    assert "\n" not in errors[0].getMessage()

    _replace(tokens, good)
    assert authorizer.check(f"Bearer {alice}", "other", Access.READ) is not None
    with pytest.raises(AuthError, match=r"^unknown token$"):
        authorizer.check("Bearer st_nobody", "other", Access.READ)
    os.unlink(tokens)  # a file that disappears fails closed too
    with pytest.raises(AuthError, match="malformed or unreadable"):
        authorizer.check(f"Bearer {alice}", "other", Access.READ)


# --- generated documents: read exactly as a straightforward reading would, or refused --------------------

_FIELDS = {"subject", "sha256", "read", "write"}
_DELETE = object()
_scalars = st.one_of(st.text(max_size=4), st.integers(), st.booleans(), st.none(), st.floats(allow_nan=False))
_printable = st.characters(min_codepoint=32, max_codepoint=0x2FF, exclude_categories=("Cc",))
_good_patterns = st.lists(st.text(_printable, min_size=1, max_size=4), max_size=3)
_good_entries = st.fixed_dictionaries(
    {
        "subject": st.text(_printable, min_size=1, max_size=6),
        "sha256": st.one_of(st.sampled_from([SHA, OTHER_SHA]), st.text("0123456789abcdef", min_size=64, max_size=64)),
    },
    optional={"read": _good_patterns, "write": _good_patterns},
)
_bad_values = st.one_of(
    _scalars,
    st.text("0123456789abcdefABCDEF \n", min_size=60, max_size=66),
    st.text(st.characters(max_codepoint=0x7F), max_size=4),
    st.lists(st.one_of(st.text(max_size=4), _scalars), max_size=3),
    st.dictionaries(st.text(max_size=2), st.text(max_size=2), max_size=2),
    st.lists(st.lists(st.text(max_size=2), max_size=2), max_size=2),
    st.just(_DELETE),
)
_mutations = st.one_of(
    st.none(), st.tuples(st.sampled_from(sorted(_FIELDS | {"admin"})), _bad_values), st.just("not an entry")
)


def _mutated(entry: dict[str, Any], mutation: object) -> object:
    """A valid entry, kept (None), replaced by a non-entry, or with one field changed or deleted."""
    if mutation is None or isinstance(mutation, str):
        return entry if mutation is None else mutation
    key, value = mutation  # type: ignore[misc]
    changed = {k: v for k, v in entry.items() if k != key}
    return changed if value is _DELETE else {**changed, key: value}


# one entry in eight changed in one place, one document in four of another shape: about half the documents
# are read, half refused
_entries = st.builds(_mutated, _good_entries, st.integers(0, 7).flatmap(lambda n: _mutations if n == 0 else st.none()))
_other_documents = st.one_of(
    st.fixed_dictionaries({"tokens": st.lists(_entries, max_size=4)}, optional={"extra": _scalars}),
    st.fixed_dictionaries({"tokens": st.one_of(_entries, _bad_values.filter(lambda v: v is not _DELETE))}),
    st.lists(_entries, max_size=2),
    _scalars,
)
_documents = st.integers(0, 3).flatmap(
    lambda n: _other_documents if n == 0 else st.fixed_dictionaries({"tokens": st.lists(_entries, max_size=4)})
)


def _patterns(value: object) -> tuple[str, ...] | None:
    if type(value) is not list or any(type(p) is not str or p == "" for p in value):
        return None
    return tuple(value)


def _unprintable(char: str) -> bool:
    """What a subject may not hold, as the tokens file's documentation says: C0 and C1 controls, line and
    paragraph separators, and the bidi controls that reorder what is shown."""
    code = ord(char)
    return (
        code < 32
        or 127 <= code <= 159
        or code in (0x2028, 0x2029)
        or 0x202A <= code <= 0x202E
        or 0x2066 <= code <= 0x2069
    )


def _grant(entry: object, seen: set[str]) -> Grant | None:
    """A straightforward reading of one entry (None: refused)."""
    if type(entry) is not dict or not {"subject", "sha256"} <= entry.keys() <= _FIELDS:
        return None
    subject, sha256 = entry["subject"], entry["sha256"]
    if type(subject) is not str or not subject or any(_unprintable(c) for c in subject):
        return None
    if type(sha256) is not str or not re.fullmatch("[0-9a-f]{64}", sha256) or sha256 in seen:
        return None
    seen.add(sha256)
    read, write = _patterns(entry.get("read", [])), _patterns(entry.get("write", []))
    return None if read is None or write is None else Grant(subject, sha256, read, write)


def _straightforward(document: object) -> list[Grant] | None:
    if type(document) is not dict or document.keys() != {"tokens"} or type(document["tokens"]) is not list:
        return None
    seen: set[str] = set()
    grants = [_grant(entry, seen) for entry in document["tokens"]]
    return None if None in grants else [g for g in grants if g is not None]


@settings(max_examples=400, deadline=None)
@given(_documents)
@example({"tokens": [{"subject": "\x80", "sha256": "a" * 64}]})  # a C1 control: refused (found by Hypothesis)
@example({"tokens": [{"subject": "caf\u00e9 \u2713", "sha256": "b" * 64}]})  # printable unicode: read
def test_generated_documents_are_read_as_written_or_refused(document: object) -> None:
    expected = _straightforward(document)
    try:
        parsed = parse_tokens(json.dumps(document).encode(), "generated")
    except TokensFileError as exc:
        assert expected is None, exc
        assert "\n" not in str(exc)
        return
    grants = [Grant(e.subject, e.sha256, tuple(e.read), tuple(e.write)) for e in parsed.tokens]
    assert grants == expected
    assert isinstance(document, dict)
    for entry in document["tokens"]:  # never a grant from anything but a list of strings
        assert all(type(entry.get(key, [])) is list for key in ("read", "write"))
