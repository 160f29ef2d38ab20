"""The RocksDB (rocksdict) index of a repository: per dataset, the tip it was synced to, block bytes
by hash, block hash and bytes by sequence number (the chain in order), the block packs whose blocks it
holds, and objects known to be present. Everything in it can be rebuilt from the store (delete the
directory), so it is a cache that makes reads O(1) round trips."""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import orjson
from rocksdict import AccessType, Options, Rdict, WriteBatch

from smart_transfer.model import ChainTip, DatasetName, Multihash
from smart_transfer.repo.errors import RepositoryError
from smart_transfer.repo.layout import ObjectKind

_SEQ = struct.Struct(">Q")


def _key(dataset: str, tag: str, rest: bytes = b"") -> bytes:
    # NUL never occurs in a dataset name, so keys of different datasets cannot collide
    return dataset.encode() + b"\0" + tag.encode() + b"\0" + rest


#: Seconds a command that writes the index waits for another process to release it before it says
#: which process holds it (reading commands open it without the lock and never wait).
INDEX_LOCK_WAIT_SECONDS = 10.0
#: RocksDB info logs kept beside the index: each open starts a new one (RocksDB's default keeps 1000, so
#: every command, an up-to-date pull too, left a file behind and each open lists them all).
INFO_LOGS_KEPT = 4
#: Threads RocksDB starts at each open to read its table files (its default, 16, is for databases of
#: thousands of files; an index has a few, and starting the threads cost an up-to-date pull about 1 ms).
FILE_OPENING_THREADS = 2


def lock_holder(lock_file: Path) -> str | None:
    """Which process holds the POSIX lock on ``lock_file`` ("process 123 (smart-transfer pull ...)"),
    from /proc/locks; None when no process does or it cannot be told."""
    try:
        inode = lock_file.stat().st_ino
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 5 and fields[5].rsplit(":", 1)[-1] == str(inode):
            pid = fields[4]
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                command = ""
            return f"process {pid}" + (f" ({command.strip()[:120]})" if command.strip() else "")
    return None


def _open_error(path: Path, exc: Exception, holder: str | None, waited: float) -> RepositoryError:
    if holder is not None:
        return RepositoryError(f"the index {path} is in use by {holder}; waited {waited:g} s for it (try again later)")
    return RepositoryError(f"cannot open index {path}: {exc}")


class RepositoryIndex:
    """One index for all datasets of a repository."""

    def __init__(self, path: Path, *, read_only: bool = False, lock_wait: float = INDEX_LOCK_WAIT_SECONDS) -> None:
        """``read_only``: opened without the lock, seeing the index as it was when opened (writes fail).
        Otherwise the lock is waited for up to ``lock_wait`` seconds while another process holds it."""
        self.read_only = read_only
        path.mkdir(parents=True, exist_ok=True)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_keep_log_file_num(INFO_LOGS_KEPT)
        options.set_max_file_opening_threads(FILE_OPENING_THREADS)
        if read_only and not (path / "CURRENT").exists():
            # an index directory no process has initialised yet (an empty workspace): make it empty, once,
            # so a reader sees no dataset instead of failing (the lock is free while nobody holds the index)
            RepositoryIndex(path, lock_wait=lock_wait).close()
        access = AccessType.read_only() if read_only else AccessType.read_write()
        deadline = time.monotonic() + lock_wait
        while True:
            try:
                self._db = Rdict(str(path), options, access_type=access)
                return
            except Exception as exc:  # rocksdict raises plain Exception on lock conflicts
                holder = lock_holder(path / "LOCK") if "lock" in str(exc).lower() else None
                if holder is not None and holder.split()[1] == str(os.getpid()):
                    raise RepositoryError(f"the index {path} is already open in this process") from None
                if holder is None or time.monotonic() >= deadline:
                    raise _open_error(path, exc, holder, lock_wait) from None
            time.sleep(0.1)

    def close(self) -> None:
        self._db.close()

    def check(self) -> None:
        """Raise RepositoryError unless the index can be written and read back (a readiness probe)."""
        probe = b"\0probe"
        try:
            self._db[probe] = b"1"
            ok = self._db.get(probe) == b"1"
        except Exception as exc:  # rocksdict raises plain Exception
            raise RepositoryError(f"the index is not usable: {exc}") from None
        if not ok:
            raise RepositoryError("the index did not read back what was written")

    def tip(self, dataset: DatasetName) -> ChainTip | None:
        raw = self._db.get(_key(dataset, "tip"))
        if raw is None:
            return None
        obj = orjson.loads(raw)
        return ChainTip(Multihash.parse(obj["head"]), obj["seq"], obj["dataset_id"], obj["next_offset"])

    def block_bytes(self, dataset: DatasetName, block_hash: Multihash) -> bytes | None:
        value: bytes | None = self._db.get(_key(dataset, "b", str(block_hash).encode()))
        return value

    def entry_at(self, dataset: DatasetName, seq: int) -> tuple[Multihash, int] | None:
        """The hash of the block at ``seq`` on the indexed chain and the next offset after it."""
        raw = self._db.get(_key(dataset, "s", _SEQ.pack(seq)))
        if raw is None:
            return None
        text, offset = raw.split(b" ", 2)[:2]
        return Multihash.parse(text.decode()), int(offset)

    def _entries(self, dataset: DatasetName, first_seq: int, last_seq: int) -> Iterator[list[bytes]]:
        """The sequence entries ``first_seq..last_seq`` of the indexed chain, in order (one scan, not
        a lookup per block), each split into hash, next offset and (recorded since packs) the block."""
        expected = first_seq
        prefix = _key(dataset, "s")
        if first_seq <= last_seq:
            for key, value in self._db.items(from_key=prefix + _SEQ.pack(first_seq)):
                assert isinstance(key, bytes) and isinstance(value, bytes)  # raw mode
                if key != prefix + _SEQ.pack(expected):
                    break
                yield value.split(b" ", 2)
                if expected == last_seq:
                    return
                expected += 1
        if expected <= last_seq:
            raise RepositoryError(f"index of {dataset} has no block {expected}; delete the index to rebuild it")

    def hashes_between(self, dataset: DatasetName, first_seq: int, last_seq: int) -> Iterator[Multihash]:
        """Hashes of blocks ``first_seq..last_seq`` (inclusive) of the indexed chain, in order."""
        for entry in self._entries(dataset, first_seq, last_seq):
            yield Multihash.parse(entry[0].decode())

    def chain_blocks(
        self, dataset: DatasetName, first_seq: int, last_seq: int
    ) -> Iterator[tuple[Multihash, bytes | None]]:
        """Hashes and bytes of blocks ``first_seq..last_seq`` of the indexed chain, in order, read in
        one scan: a 100,000-block pull plans without a random lookup per block. The bytes are None in
        entries recorded by an index from before packs (then look them up by hash)."""
        for entry in self._entries(dataset, first_seq, last_seq):
            yield Multihash.parse(entry[0].decode()), entry[2] if len(entry) > 2 else None

    def chain_hash_texts(
        self, dataset: DatasetName, first_seq: int, last_seq: int
    ) -> Iterator[tuple[str, bytes | None]]:
        """``chain_blocks`` with each hash as its text, unparsed: a scan that needs few of the hashes
        (comparing two versions) skips 100,000 parses."""
        for entry in self._entries(dataset, first_seq, last_seq):
            yield entry[0].decode(), entry[2] if len(entry) > 2 else None

    def object_size(self, dataset: DatasetName, kind: ObjectKind, object_hash: Multihash) -> int | None:
        raw = self._db.get(_key(dataset, "o", f"{kind.value}/{object_hash}".encode()))
        return None if raw is None else int(_SEQ.unpack(raw)[0])

    def forget_objects(self, dataset: DatasetName, objects: Iterable[tuple[ObjectKind, Multihash]]) -> None:
        """Drop presence records (always safe: presence is a cache; the worst case is a re-upload)."""
        batch = WriteBatch(raw_mode=True)
        for kind, object_hash in objects:
            batch.delete(_key(dataset, "o", f"{kind.value}/{object_hash}".encode()))
        self._db.write(batch)

    def record_staged(self, dataset: DatasetName, kind: ObjectKind, object_hash: Multihash, md5_hex: str) -> None:
        """Remember the MD5 of an object this server uploaded itself after hashing its body (a simple
        protocol PUT), so the commit that references it checks it like a promised one."""
        self._db[_key(dataset, "m", f"{kind.value}/{object_hash}".encode())] = md5_hex.encode()

    def staged_md5(self, dataset: DatasetName, kind: ObjectKind, object_hash: Multihash) -> str | None:
        raw = self._db.get(_key(dataset, "m", f"{kind.value}/{object_hash}".encode()))
        return None if raw is None else raw.decode()

    def record_blocks(
        self, dataset: DatasetName, blocks: Iterable[tuple[Multihash, bytes]], pack: Multihash | None = None
    ) -> None:
        """Cache block bytes by hash (content-addressed: valid whether or not they are on the chain);
        with ``pack``, remember too that every block of that pack is cached (one batch)."""
        batch = WriteBatch(raw_mode=True)
        prefix = _key(dataset, "b")  # once, not per block: this runs over every block of a long pull
        for block_hash, data in blocks:
            batch.put(prefix + str(block_hash).encode(), data)
        if pack is not None:
            batch.put(_key(dataset, "p", str(pack).encode()), b"")
        self._db.write(batch)

    def has_pack(self, dataset: DatasetName, pack: Multihash) -> bool:
        """Whether every block of ``pack`` is cached here."""
        return self._db.get(_key(dataset, "p", str(pack).encode())) is not None

    def advance(
        self,
        dataset: DatasetName,
        old_tip: ChainTip | None,
        new_tip: ChainTip,
        entries: Iterable[tuple[int, Multihash, int, bytes]],
        objects: Iterable[tuple[ObjectKind, Multihash, int]],
    ) -> None:
        """Atomically record a new tip: sequence entries ``(seq, hash, next_offset, block bytes)`` for
        the new blocks, the objects they reference, and drop entries beyond the new tip (after a rewrite)."""
        batch = WriteBatch(raw_mode=True)
        prefix = _key(dataset, "s")
        for seq, block_hash, next_offset, data in entries:
            batch.put(prefix + _SEQ.pack(seq), f"{block_hash} {next_offset} ".encode() + data)
        if old_tip is not None:
            for seq in range(new_tip.sequence_number + 1, old_tip.sequence_number + 1):
                batch.delete(_key(dataset, "s", _SEQ.pack(seq)))
        for kind, object_hash, size in objects:
            batch.put(_key(dataset, "o", f"{kind.value}/{object_hash}".encode()), _SEQ.pack(size))
        tip = {
            "head": str(new_tip.head),
            "seq": new_tip.sequence_number,
            "dataset_id": new_tip.dataset_id,
            "next_offset": new_tip.next_offset,
        }
        batch.put(_key(dataset, "tip"), orjson.dumps(tip))
        self._db.write(batch)

    def forget(self, dataset: DatasetName) -> None:
        """Drop everything indexed about ``dataset``."""
        prefix = dataset.encode() + b"\0"
        self._db.delete_range(prefix, dataset.encode() + b"\x01")

    def remote_head(self, dataset: DatasetName, remote: str) -> Multihash | None:
        """The head ``remote`` had when this repository last synced ``dataset`` with it."""
        raw = self._db.get(_key(dataset, "r", remote.encode()))
        return None if raw is None else Multihash.parse(raw.decode())

    def set_remote_head(self, dataset: DatasetName, remote: str, head: Multihash) -> None:
        """Record the head ``remote`` has now. Unchanged, nothing is written: an up-to-date pull or a no-op
        push then leaves RocksDB nothing to flush when the index closes (tens of milliseconds)."""
        key, value = _key(dataset, "r", remote.encode()), str(head).encode()
        if self._db.get(key) != value:
            self._db[key] = value

    def objects(self, dataset: DatasetName) -> Iterator[tuple[ObjectKind, Multihash, int]]:
        """Every object recorded present for ``dataset``."""
        prefix = _key(dataset, "o")
        for key, value in self._db.items(from_key=prefix):
            assert isinstance(key, bytes) and isinstance(value, bytes)  # raw mode
            if not key.startswith(prefix):
                break
            kind, _, text = key[len(prefix) :].decode().partition("/")
            yield ObjectKind(kind), Multihash.parse(text), int(_SEQ.unpack(value)[0])

    # -- peer announcements (the server's; see server/announce.py) ---------------------------------

    def record_peer(self, dataset: DatasetName, url: str, value: bytes) -> None:
        """Remember a peer announcement of ``dataset`` by its URL (the value is the caller's)."""
        self._db[_key(dataset, "p", url.encode())] = value

    def peer_records(self, dataset: DatasetName) -> Iterator[tuple[str, bytes]]:
        """Every peer announcement recorded for ``dataset``: (URL, value)."""
        prefix = _key(dataset, "p")
        for key, value in self._db.items(from_key=prefix):
            assert isinstance(key, bytes) and isinstance(value, bytes)  # raw mode
            if not key.startswith(prefix):
                break
            yield key[len(prefix) :].decode(), value

    def forget_peers(self, dataset: DatasetName, urls: Iterable[str]) -> None:
        batch = WriteBatch(raw_mode=True)
        for url in urls:
            batch.delete(_key(dataset, "p", url.encode()))
        self._db.write(batch)

    # -- records derived from a dataset's chain (the server's table history; see repo/dataset.py) ---

    def derived_records(self, dataset: DatasetName, kind: str, first: int, last: int) -> list[bytes | None]:
        """The records ``first..last`` of ``kind`` derived from ``dataset``'s chain (None where none)."""
        keys: list[str | int | float | bytes | bool] = [
            _key(dataset, "d", f"{kind}/".encode() + _SEQ.pack(number)) for number in range(first, last + 1)
        ]
        return list(self._db.get(keys) or []) if keys else []  # one multi-get

    def record_derived(self, dataset: DatasetName, kind: str, records: Iterable[tuple[int, bytes]]) -> None:
        """Record derived records by number, in one atomic batch (``forget`` drops them with the dataset)."""
        batch = WriteBatch(raw_mode=True)
        for number, raw in records:
            batch.put(_key(dataset, "d", f"{kind}/".encode() + _SEQ.pack(number)), raw)
        self._db.write(batch)

    # -- slice statistics (Delta Sharing's; see repo/footer_stats.py) ------------------------------

    #: Statistics are the content's, so they are kept by physical hash for every dataset at once; a
    #: dataset name is never empty, so this prefix is no dataset's. The format's version is in the key.
    _STATS_PREFIX = b"\0stats\0"

    def slice_stats(self, format_version: int, hashes: Sequence[str]) -> list[bytes | None]:
        """The recorded statistics of each slice by physical hash (None where none are recorded)."""
        prefix = self._STATS_PREFIX + str(format_version).encode() + b"\0"
        found = self._db.get([prefix + text.encode() for text in hashes])  # one multi-get
        return list(found or [])

    def record_slice_stats(self, format_version: int, records: Iterable[tuple[str, bytes]]) -> None:
        """Record statistics by physical hash: one atomic batch, so a reader sees a record whole or not at
        all (a crash midway loses records, which are read again from their footers)."""
        prefix = self._STATS_PREFIX + str(format_version).encode() + b"\0"
        batch = WriteBatch(raw_mode=True)
        for text, raw in records:
            batch.put(prefix + text.encode(), raw)
        self._db.write(batch)
