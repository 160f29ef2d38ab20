"""Which manifest pages a sync sends: those of the new checkpoints the receiver does not hold.

The receiver holds every page of every checkpoint on its chain (it stored them when it got them). A
sender names one such checkpoint, the **base** (the last one at or before the common block), walks
its tree only where it differs from the new trees (a page whose hash the new trees share is the same
subtree on both sides, so the walk stops there) and sends the new pages outside those shared
subtrees. What it leaves out the receiver reads from its own store; what it sends twice is only
waste, never wrong. Pure: pages come from a ``PageSource``.
"""

from __future__ import annotations

from collections.abc import Iterable

from smart_transfer.model.encoding import decode_object
from smart_transfer.model.errors import InvalidBlock
from smart_transfer.model.manifest import CheckpointManifest
from smart_transfer.model.manifest_pages import PageSource, decode_page, is_page
from smart_transfer.model.multihash import Multihash


def _children(data: bytes) -> list[Multihash]:
    """The child pages a page names (none for a leaf or a format-1 manifest)."""
    try:
        obj = decode_object(data)
        return [c.hash for c in decode_page(data, obj).children] if is_page(obj) else []
    except InvalidBlock:
        return []  # the sender's own copy is bad: nothing below it counts as shared


def shared_pages(base: tuple[Multihash, bytes], new_pages: set[Multihash], source: PageSource) -> set[Multihash]:
    """Pages of the base tree (rooted at ``base``) that also belong to the new trees, each standing for
    its whole subtree; only the base pages above them are read (from ``source``)."""
    shared: set[Multihash] = set()
    frontier = [base]
    while frontier:
        below = []
        for page_hash, data in frontier:
            if page_hash in new_pages:
                shared.add(page_hash)
                continue
            for child in _children(data):
                child_data = source(child)
                if child_data is not None:
                    below.append((child, child_data))
        frontier = below
    return shared


def pages_to_send(manifests: Iterable[CheckpointManifest], held: set[Multihash]) -> dict[Multihash, bytes]:
    """Every page of ``manifests`` outside the subtrees whose roots are in ``held``, each once."""
    out: dict[Multihash, bytes] = {}
    for manifest in manifests:
        pages = dict(manifest.all_pages())
        stack = [manifest.hash()]
        while stack:
            page_hash = stack.pop()
            if page_hash in held or page_hash in out or page_hash not in pages:
                continue
            out[page_hash] = pages[page_hash]
            stack.extend(_children(pages[page_hash]))
    return out


def files_listed(pages: Iterable[bytes]) -> set[Multihash] | None:
    """The files the leaf pages among ``pages`` list; None when one of them is not a page (a format-1
    manifest lists its files whole: the caller then takes every file)."""
    files: set[Multihash] = set()
    for data in pages:
        obj = decode_object(data)
        if not is_page(obj):
            return None
        files.update(f.physical_hash for f in decode_page(data, obj).files)
    return files
