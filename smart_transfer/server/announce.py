"""Peer announcements (``pull --announce URL``): which workspaces serve a dataset's objects, listed in
the pull plans of other readers for a time-to-live.

Each replica keeps its own announcements in its index (announcements are hints that expire in
minutes; sharing them through the store would cost a listing per pull). A client that reaches another
replica through a balancer simply sees fewer peers and fetches from storage. Peers are never trusted:
a listing only saves storage requests, and the client verifies every object it gets from a peer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import orjson

from smart_transfer.model import Multihash
from smart_transfer.protocol.messages import PeerSource
from smart_transfer.repo.dataset import DatasetRepository

#: Most announcements kept per dataset and replica: a reader announcing many URLs replaces the
#: oldest ones instead of growing the index.
MAX_ANNOUNCEMENTS_PER_DATASET = 256


@dataclass(frozen=True, slots=True)
class Announcement:
    """One peer: its dataset URL, the head it had, when the listing ends, who announced it."""

    url: str
    head: str
    expires_at: float
    subject: str

    def encode(self) -> bytes:
        return orjson.dumps({"head": self.head, "expires_at": self.expires_at, "subject": self.subject})

    @classmethod
    def decode(cls, url: str, value: bytes) -> Announcement | None:
        try:
            fields = orjson.loads(value)
            return cls(url, str(fields["head"]), float(fields["expires_at"]), str(fields["subject"]))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None  # unreadable: treated as expired, and dropped


class PeerBook:
    """Announcements with a time-to-live, at most ``max_listed`` per pull plan (newest first)."""

    def __init__(self, ttl_seconds: float, max_listed: int) -> None:
        self.ttl_seconds = ttl_seconds
        self.max_listed = max_listed

    def announce(
        self, dataset: DatasetRepository, url: str, head: Multihash, subject: str, until: float | None = None
    ) -> None:
        """Record (or renew) that ``url`` serves ``dataset``'s objects up to ``head``, listed for the
        time-to-live but never past ``until`` (the announcing token's expiry, a Unix time)."""
        others = [a for a in self._live(dataset) if a.url != url]
        excess = len(others) - MAX_ANNOUNCEMENTS_PER_DATASET + 1
        if excess > 0:
            dataset.forget_peers([a.url for a in others[:excess]])
        ends = time.time() + self.ttl_seconds
        announcement = Announcement(url, str(head), ends if until is None else min(ends, until), subject)
        dataset.record_peer(url, announcement.encode())

    def listed(self, dataset: DatasetRepository, exclude: str | None = None) -> list[PeerSource]:
        """The live peers of ``dataset`` for one pull plan (not the client's own announcement)."""
        live = sorted(self._live(dataset), key=lambda a: a.expires_at, reverse=True)
        return [PeerSource(url=a.url, head=a.head) for a in live if a.url != exclude][: self.max_listed]

    def _live(self, dataset: DatasetRepository) -> list[Announcement]:
        """Live announcements, oldest first; expired ones are dropped on the way."""
        now = time.time()
        live, expired = [], []
        for url, value in dataset.peer_records():
            announcement = Announcement.decode(url, value)
            if announcement is None or announcement.expires_at <= now:
                expired.append(url)
            else:
                live.append(announcement)
        if expired and dataset.writable:
            dataset.forget_peers(expired)
        return sorted(live, key=lambda a: a.expires_at)
