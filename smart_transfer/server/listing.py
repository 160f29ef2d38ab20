"""Which datasets a grant may list, a page at a time: the one listing every face pages through (``GET /``,
the web view's list, Delta Sharing's tables). A page walks the store's dataset folders in their order
(``Repository.candidate_names``: S3 lists them from the page token, a page at a time), keeps the names the
grant may read (and a face's filter matches), reads the heads of those only, and stops at the page size
or after MAX_EXAMINED names, so a page costs O(page), never O(datasets); a grant that matches few of many
datasets gets a short (even empty) page and a token to go on."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from smart_transfer.model import DatasetName, InvalidDatasetName
from smart_transfer.protocol.codes import ErrorCode
from smart_transfer.protocol.errors import ProtocolError
from smart_transfer.repo import Repository
from smart_transfer.server.auth import Access, Grant

#: Datasets per page when a request names no page size.
DATASETS_PER_PAGE = 100
#: Most datasets one page may ask for.
MAX_DATASETS_PER_PAGE = 1000
#: Most dataset names one page examines (grant, filter) before it stops with a token to go on.
MAX_EXAMINED = 5000
_TOKEN_PREFIX = "st1:after:"


@dataclass(frozen=True)
class DatasetPage:
    """One page of dataset names, and the token of the next page (None: this is the last)."""

    names: list[str]
    next_token: str | None


def may_list(grant: Grant | None, name: str) -> bool:
    """Whether a listing shows ``name`` to ``grant``: the grant reads it (every dataset when the server
    has no tokens: only then does the guard let a request through without a grant)."""
    return grant is None or grant.allows(name, Access.READ)


def page_token(after: str | None) -> str:
    """The opaque token of the page that starts after dataset ``after`` (None: the first page)."""
    return base64.urlsafe_b64encode(f"{_TOKEN_PREFIX}{after or ''}".encode()).decode()


def token_after(token: str | None) -> DatasetName | None:
    """The dataset a page token starts after (None: the first page). A token this server did not give
    is a ProtocolError InvalidRequest (400 on every face)."""
    if token is None or token == "":
        return None
    try:
        text = base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, UnicodeError, ValueError):
        text = ""
    if not text.startswith(_TOKEN_PREFIX):
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "the page token is not one this server gave")
    if text == _TOKEN_PREFIX:
        return None
    try:
        return DatasetName(text[len(_TOKEN_PREFIX) :])
    except InvalidDatasetName:
        raise ProtocolError(ErrorCode.INVALID_REQUEST, "the page token is not one this server gave") from None


def check_page_size(limit: int | None, smallest: int = 1) -> int:
    """A requested page size (DATASETS_PER_PAGE when None); out of ``smallest..MAX_DATASETS_PER_PAGE``
    is a ProtocolError InvalidRequest."""
    if limit is None:
        return DATASETS_PER_PAGE
    if not smallest <= limit <= MAX_DATASETS_PER_PAGE:
        raise ProtocolError(
            ErrorCode.INVALID_REQUEST, f"the page size must be {smallest}..{MAX_DATASETS_PER_PAGE}, not {limit}"
        )
    return limit


def readable_datasets(
    repository: Repository,
    grant: Grant | None,
    token: str | None,
    limit: int,
    matches: Callable[[str], bool] | None = None,
) -> DatasetPage:
    """Up to ``limit`` datasets that have a head, that ``grant`` may list and ``matches`` accepts, in the
    store's order from the page ``token`` (blocking: call from a thread)."""
    after = token_after(token)
    candidates = repository.candidate_names(after)
    if limit <= 0:
        return DatasetPage([], page_token(after) if next(candidates, None) is not None else None)
    names: list[str] = []
    batch: list[DatasetName] = []
    for examined, name in enumerate(candidates, 1):
        after = name
        if shown(grant, name, matches):
            batch.append(name)
        if len(batch) + len(names) >= limit or examined >= MAX_EXAMINED:
            names += repository.with_heads(batch)
            batch = []
            if len(names) >= limit or examined >= MAX_EXAMINED:
                return DatasetPage(names, _next(candidates, after, examined, lambda n: shown(grant, n, matches)))
    names += repository.with_heads(batch)
    return DatasetPage(names, None)


def shown(grant: Grant | None, name: str, matches: Callable[[str], bool] | None) -> bool:
    """Whether a listing that filters with ``matches`` shows ``name`` to ``grant`` (if it has a head)."""
    return may_list(grant, name) and (matches is None or matches(name))


def _next(candidates: Iterator[DatasetName], after: str, examined: int, wanted: Callable[[str], bool]) -> str | None:
    """The next page's token: None unless the store has a further folder the listing would show (looked
    for within the page's MAX_EXAMINED names; past them, a token from the last one looked at)."""
    for count, name in enumerate(candidates, examined + 1):
        if wanted(name):
            return page_token(after)
        after = name
        if count >= MAX_EXAMINED:
            return page_token(after)
    return None
