"""A process-wide cache of the checkpoint manifest pages read from stores, so a server that plans a
pull or checks a push of a checkpoint reads from S3 only the pages it has not seen (a checkpoint of
20,000 files has about 2,400 pages, and the next one shares nearly all of them).

Pages are content-addressed and immutable, only intact ones are cached and every reader checks a page
against its hash anyway, so a cached page is that page. Only its presence in the store may go stale
(gc deleting it): that is harmless, because whether an object is stored is always asked of the store
or the index (object negotiation, commit verification), never of this cache."""

from __future__ import annotations

from smart_transfer.model import Multihash
from smart_transfer.storage.lru import BytesLru

#: Most page bytes the cache holds (least recently used go first): about 25 checkpoints of 20,000 files.
PAGE_CACHE_BYTES = 64 * 1024 * 1024

#: (store, dataset, page hash): the same page in two stores is cached once per store.
PageKey = tuple[str, str, Multihash]
#: A bounded LRU of page bytes, safe across threads.
PageCache = BytesLru[PageKey]

#: The one cache of this process.
PAGES = PageCache(PAGE_CACHE_BYTES)
