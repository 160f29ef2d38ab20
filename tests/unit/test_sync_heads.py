"""What a client concludes from the remote head (sync/heads.py): the rules the pull and push drivers ask."""

from __future__ import annotations

from smart_transfer.model import Multihash
from smart_transfer.sync.heads import StaleHead, after_invalid_head, local_ahead, remote_has_more

OURS = [Multihash.of(bytes([i])) for i in range(3)]  # the local chain, oldest first
THEIRS = Multihash.of(b"a block the local chain lacks")


def contains(block: Multihash) -> bool:
    return block in OURS


def test_the_local_dataset_is_ahead_when_the_remote_head_is_an_older_block_of_it() -> None:
    head = OURS[-1]
    assert local_ahead(contains, head, OURS[0])
    assert local_ahead(contains, head, str(OURS[1]))  # the text an error's details carry
    assert not local_ahead(contains, head, head)  # level, not ahead
    assert not local_ahead(contains, head, THEIRS)
    assert not local_ahead(contains, head, None)
    assert not local_ahead(contains, head, "not a hash")


def test_a_remote_head_on_no_local_chain_means_pull_first() -> None:
    assert remote_has_more(contains, THEIRS)
    assert not remote_has_more(contains, OURS[0])
    assert not remote_has_more(contains, None)  # no dataset there yet


def test_a_stale_record_of_the_remote_head_is_retried_from_the_actual_one() -> None:
    assert after_invalid_head(contains, OURS[0], OURS[1]) is StaleHead.RETRY
    assert after_invalid_head(contains, None, OURS[1]) is StaleHead.RETRY
    assert after_invalid_head(contains, OURS[0], None) is StaleHead.RETRY  # the remote dataset is gone
    assert after_invalid_head(contains, OURS[0], THEIRS) is StaleHead.PULL_FIRST
    assert after_invalid_head(contains, OURS[1], OURS[1]) is StaleHead.FINAL
