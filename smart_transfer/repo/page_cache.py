"""A process-wide cache of the checkpoint manifest pages read from stores, so a server that plans a
pull or checks a push of a checkpoint reads from S3 only the pages it has not seen (a checkpoint of
20,000 files has about 2,400 pages, and the next one shares nearly all of them).

Pages are content-addressed and immutable, only intact ones are cached and every reader checks a page
against its hash anyway, so a cached page is that page. Only its presence in the store may go stale
(gc deleting it): that is harmless, because whether an object is stored is always asked of the store
or the index (object negotiation, commit verification), never of this cache."""

from __future__ import annotations

import threading
from collections import OrderedDict

from smart_transfer.model import Multihash

#: Most page bytes the cache holds (least recently used go first): about 25 checkpoints of 20,000 files.
PAGE_CACHE_BYTES = 64 * 1024 * 1024

#: (store, dataset, page hash): the same page in two stores is cached once per store.
PageKey = tuple[str, str, Multihash]


class PageCache:
    """A bounded LRU of page bytes, safe across threads."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._pages: OrderedDict[PageKey, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: PageKey) -> bytes | None:
        """The cached page, or None."""
        with self._lock:
            data = self._pages.get(key)
            if data is not None:
                self._pages.move_to_end(key)
            return data

    def put(self, key: PageKey, data: bytes) -> None:
        """Remember a page read from a store."""
        if len(data) > self.max_bytes:
            return
        with self._lock:
            if key in self._pages:
                return
            self._pages[key] = data
            self._bytes += len(data)
            while self._bytes > self.max_bytes:
                _, dropped = self._pages.popitem(last=False)
                self._bytes -= len(dropped)


#: The one cache of this process.
PAGES = PageCache(PAGE_CACHE_BYTES)
