"""Each page's values, gathered from the repository in one blocking call (run in a thread), and the
checks of the pages' query parameters (a bad one is a PageError: a page with status 400 or 404)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from smart_transfer.config import values
from smart_transfer.model import ModelError
from smart_transfer.repo.errors import DatasetNotFound
from smart_transfer.repo.repository import per_dataset
from smart_transfer.server.delta_sharing.naming import SCHEMA, SHARE, table_name
from smart_transfer.server.listing import MAX_DATASETS_PER_PAGE, readable_datasets
from smart_transfer.server.state import ServerState
from smart_transfer.server.ui.chart import charts
from smart_transfer.server.ui.views import ChainRow, DatasetRow, Remembered, chain_rows, dataset_row, preview
from smart_transfer.server.ui.visitor import Visitor

#: Datasets per page of the list, unless ``?per=`` says otherwise (within PER_PAGE_RANGE).
DATASETS_PER_PAGE = 100
#: Blocks per page of a dataset's chain, unless ``?per=`` says otherwise.
BLOCKS_PER_PAGE = 50
#: The page sizes ``?per=`` may ask for.
PER_PAGE_RANGE = (1, 500)
#: Columns the dataset list sorts by (``?sort=``), and the order of each unless ``?order=`` says.
SORTS = {
    "name": "asc",
    "blocks": "desc",
    "records": "desc",
    "data_bytes": "desc",
    "checkpoint_bytes": "desc",
    "last_commit": "desc",
}
#: Longest filter text (``?q=``).
MAX_FILTER_CHARS = 100


class PageError(Exception):
    """A request the page cannot answer: status (400, 404) and one sentence."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)


def whole_number(text: str | None, what: str, default: int, bounds: tuple[int, int]) -> int:
    """A query parameter holding a whole number within ``bounds`` (the one rule: ``config/values.py``;
    PageError 400 otherwise); ``default`` when it is absent or empty."""
    if text is None or text == "":
        return default
    try:
        return values.whole_number(text, what, *bounds)
    except values.BadValue as exc:
        raise PageError(400, str(exc)) from None


def page_number(text: str | None) -> int:
    """``?page=``: 1 when absent."""
    return whole_number(text, "page", 1, (1, 10**9))


def per_page(text: str | None, default: int) -> int:
    """``?per=``: ``default`` when absent."""
    return whole_number(text, "per", default, PER_PAGE_RANGE)


@dataclass(frozen=True)
class Paging:
    """Which page of how many."""

    number: int
    count: int
    per: int

    @classmethod
    def of(cls, number: int, total: int, per: int, what: str) -> Paging:
        count = max(1, math.ceil(total / per))
        if number > count:
            raise PageError(404, f"page {number} is past the end: {what} has {count} page(s) of {per}")
        return cls(number, count, per)


def sort_of(sort: str | None, order: str | None) -> tuple[str, str]:
    """The list's sort column and order (PageError 400 for anything else)."""
    column = sort or "name"
    if column not in SORTS:
        raise PageError(400, f"sort must be one of {', '.join(SORTS)}, not {column[:40]!r}")
    direction = order or SORTS[column]
    if direction not in ("asc", "desc"):
        raise PageError(400, f"order must be asc or desc, not {direction[:40]!r}")
    return column, direction


def _summaries(state: ServerState, memory: Remembered, names: list[str]) -> list[DatasetRow]:
    """Each dataset's summary, HEAD_READS_PARALLEL at a time (on S3 each reads its head)."""

    def summary(name: str) -> DatasetRow | None:
        try:
            return memory.summary(state.repository.dataset(name))
        except (ModelError, DatasetNotFound):
            return None  # removed since it was listed

    return [row for row in per_dataset(summary, names) if row is not None]


def datasets_page(
    state: ServerState,
    memory: Remembered,
    visitor: Visitor,
    query: str,
    sort: tuple[str, str],
    page: tuple[int, str | None],
    per: int,
) -> dict[str, Any]:
    """The datasets the visitor may read that match ``query``, one page of them: in name order a page at a
    time from the page token (server/listing.py, as every face lists them: the first page costs O(page));
    sorted by anything else, every readable dataset's summary is read and sorted."""
    if len(query) > MAX_FILTER_CHARS:
        raise PageError(400, f"the filter is longer than {MAX_FILTER_CHARS} characters")
    number, token = page
    matches = (lambda name: query.lower() in name.lower()) if query else None
    if sort == ("name", "asc"):
        listed = readable_datasets(state.repository, visitor.grant, token, per, matches)
        rows = _summaries(state, memory, listed.names)
        return {"rows": rows, "paging": None, "number": number if token else 1, "per": per, "next": listed.next_token}
    return _sorted_page(state, memory, visitor, matches, sort, number, per)


def _sorted_page(
    state: ServerState,
    memory: Remembered,
    visitor: Visitor,
    matches: Callable[[str], bool] | None,
    sort: tuple[str, str],
    number: int,
    per: int,
) -> dict[str, Any]:
    """Page ``number`` of every readable dataset matching, sorted by ``sort`` (reads every summary)."""
    names: list[str] = []
    following: str | None = None
    while True:  # every page, through the one listing
        listed = readable_datasets(state.repository, visitor.grant, following, MAX_DATASETS_PER_PAGE)
        names, following = names + listed.names, listed.next_token
        if following is None:
            break
    rows = _summaries(state, memory, [name for name in names if matches is None or matches(name)])
    column, direction = sort
    rows.sort(key=lambda row: (row.sort_key(column), row.name), reverse=direction == "desc")
    paging = Paging.of(number, len(rows), per, "the list")
    first = (paging.number - 1) * per
    return {"rows": rows[first : first + per], "paging": paging, "total": len(rows), "readable": len(names)}


def count_preview(state: ServerState, count: int) -> None:
    """The bytes a page reads from the store (the preview's, a block page's rows) are data bytes through
    the server: counted there, and on their own."""
    state.count_object_bytes(count)
    state.metrics.preview_bytes.inc(count)


def dataset_page(
    state: ServerState, memory: Remembered, name: str, page: int, per: int, base_url: str
) -> dict[str, Any]:
    """One dataset: summary, the page of its chain (newest first), schema, preview, peers."""
    repo = state.repository.dataset(name)
    tip = repo.require_tip()
    summary = memory.summaries.get(repo.name, tip.head, lambda: dataset_row(repo))
    paging = Paging.of(page, tip.sequence_number + 1, per, "the chain")
    last = tip.sequence_number - (paging.number - 1) * per
    chain: list[ChainRow] = chain_rows(repo, tip, max(0, last - per + 1), last)
    return {
        "summary": summary,
        "paging": paging,
        "chain": chain,
        "charts": charts(memory.growth_of(repo, tip)),
        "about": memory.about_of(repo, tip),
        "preview": preview(repo, tip, lambda count: count_preview(state, count)),
        "peers": state.peers.listed(repo),
        "pull": pull_command(base_url, repo.name, not state.authorizer.anonymous),
        "sharing": sharing_lines(base_url, repo.name),
    }


#: What the pull command shows for the token on a server with tokens: a placeholder, never a token.
TOKEN_PLACEHOLDER = "YOUR_TOKEN"


def pull_command(base_url: str, name: str, tokens: bool) -> str:
    """The command that pulls the dataset; on a server with tokens it takes one (run without, it fails)."""
    command = f"smart-transfer pull {base_url}/{name}"
    return f"{command} --token {TOKEN_PLACEHOLDER}" if tokens else command


def sharing_lines(base_url: str, name: str) -> dict[str, str]:
    """How to read the dataset as a Delta Sharing table: the profile a server operator makes (``token
    profile``) and the pandas line that loads the table with it, in the delta format (a script that reads
    the parquet format can abort as it exits: docs/how-to/delta-sharing.md)."""
    table = f"{SHARE}.{SCHEMA}.{table_name(name)}"
    return {
        "profile": f"smart-transfer token profile YOU --tokens TOKENS.json --url {base_url} --read {name} -o me.share",
        "pandas": f'delta_sharing.load_as_pandas("me.share#{table}", use_delta_format=True)',
    }
