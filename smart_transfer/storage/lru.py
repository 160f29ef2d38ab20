"""A bounded cache of immutable bytes by key, least recently used out first, safe across threads: what
the stores and the repository keep of objects that never change once written (S3 reference records,
checkpoint manifest pages)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class BytesLru(Generic[K]):
    """At most ``max_bytes`` of values; a value larger than that is not kept."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._values: OrderedDict[K, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> bytes | None:
        """The cached value, or None."""
        with self._lock:
            value = self._values.get(key)
            if value is not None:
                self._values.move_to_end(key)
            return value

    def put(self, key: K, value: bytes) -> None:
        """Remember a value read (the first copy of a key stays: the values never change)."""
        if len(value) > self.max_bytes:
            return
        with self._lock:
            if key in self._values:
                return
            self._values[key] = value
            self._bytes += len(value)
            while self._bytes > self.max_bytes:
                _, dropped = self._values.popitem(last=False)
                self._bytes -= len(dropped)
