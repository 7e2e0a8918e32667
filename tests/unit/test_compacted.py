"""LatestValues (shoal.protocol.compacted): the batch-layout fast path must give what a plain
record-by-record replay gives, key order included, on transactional, compressed, tombstone,
keyless and header-carrying inputs."""

from __future__ import annotations

import random

import pytest

from shoal.protocol import record_batch as rb
from shoal.protocol.compacted import LatestValues
from shoal.protocol.compression import GZIP, NONE
from shoal.protocol.record_encode import build_batch, build_control_batch


def _reference(batches: list[bytes], transactional: bool) -> tuple[dict, dict]:
    """The documented semantics, one decoded record at a time."""
    latest: dict[bytes, bytes | None] = {}
    pending: dict[int, dict[bytes, bytes | None]] = {}
    for buf in batches:
        for h in rb.iter_batches(buf):
            if h.attributes & rb.CONTROL_MASK:
                recs = pending.pop(h.producer_id, None)
                if recs is not None and rb.control_type(buf, h) == rb.CONTROL_COMMIT:
                    latest.update(recs)
                continue
            txn = transactional and bool(h.attributes & rb.TRANSACTIONAL_MASK)
            for r in rb.iter_records(buf, h):
                if r.key is None:
                    continue
                key, value = bytes(r.key), None if r.value is None else bytes(r.value)
                if txn:
                    pending.setdefault(h.producer_id, {})[key] = value
                else:
                    for recs in pending.values():
                        recs.pop(key, None)
                    latest[key] = value
    return latest, pending


class _Log:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.offset = 0
        self.batches: list[bytes] = []

    def plain(self, records: list[tuple[bytes | None, bytes | None]], *, pid: int = -1, txn: bool = False,
              compression: int = NONE, headers: bool = False) -> None:
        hdrs = [("h", b"x")] if headers else []
        batch = build_batch([(1000, k, v, hdrs) for k, v in records], base_offset=self.offset,
                            compression=compression, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                            is_transactional=txn)
        self.batches.append(batch)
        self.offset += len(records)

    def marker(self, pid: int, commit: bool) -> None:
        self.batches.append(build_control_batch(rb.CONTROL_COMMIT if commit else rb.CONTROL_ABORT,
                                                producer_id=pid, producer_epoch=0, coordinator_epoch=0,
                                                timestamp=1000, base_offset=self.offset))
        self.offset += 1


def _value(rng: random.Random) -> bytes | None:
    return None if rng.random() < 0.1 else rng.randbytes(8)  # fixed size: layouts recur


def _random_log(seed: int) -> _Log:
    rng = random.Random(seed)
    log = _Log(rng)
    keys = [b"k%02d" % i for i in range(12)]
    shapes = [rng.sample(keys, rng.randint(1, 5)) for _ in range(4)]  # overlapping key sets
    for _ in range(rng.randint(5, 60)):
        roll = rng.random()
        if roll < 0.55:  # a recurring shape: the fast path
            shape = rng.choice(shapes)
            log.plain([(k, _value(rng)) for k in shape], compression=rng.choice([NONE, NONE, GZIP]))
        elif roll < 0.65:  # odd sections: duplicates, keyless records, headers, other value sizes
            recs: list[tuple[bytes | None, bytes | None]] = [(rng.choice(keys), rng.randbytes(rng.randint(0, 3)))
                                                             for _ in range(rng.randint(1, 4))]
            if rng.random() < 0.3:
                recs.append((None, b"v"))
            log.plain(recs, headers=rng.random() < 0.3)
        elif roll < 0.85:
            pid = rng.randint(1, 3)
            log.plain([(k, _value(rng)) for k in rng.choice(shapes)], pid=pid, txn=True)
        else:
            log.marker(rng.randint(1, 3), rng.random() < 0.6)
    return log


@pytest.mark.parametrize("transactional", [True, False])
@pytest.mark.parametrize("seed", range(300))
def test_latest_values_agrees_with_record_by_record_replay(seed: int, transactional: bool) -> None:
    log = _random_log(seed)
    values = LatestValues(transactional)
    rng = random.Random(seed + 1)
    for i, batch in enumerate(log.batches):
        values.add(batch)
        if rng.random() < 0.05:  # reading latest midway writes layouts back; later batches still count
            assert list(values.latest.items()) == list(_reference(log.batches[:i + 1], transactional)[0].items())
    latest, pending = _reference(log.batches, transactional)
    assert list(values.latest.items()) == list(latest.items())
    assert values.pending == pending


def test_recurring_layout_keeps_first_seen_order_and_last_values() -> None:
    log = _Log(random.Random(0))
    for n in range(5):
        log.plain([(b"b", b"%d" % n), (b"a", b"%d" % n)])
        log.plain([(b"c", b"%d" % n)])
    log.plain([(b"a", None)])  # a walked section takes "a" from its layout
    log.plain([(b"b", b"9"), (b"a", b"9")])
    values = LatestValues()
    for batch in log.batches:
        values.add(batch)
    assert list(values.latest.items()) == [(b"b", b"9"), (b"a", b"9"), (b"c", b"4")]


def test_commit_after_recurring_layout_wins() -> None:
    log = _Log(random.Random(0))
    for n in range(4):
        log.plain([(b"a", b"%d" % n), (b"b", b"%d" % n)])
    log.plain([(b"a", b"t")], pid=7, txn=True)
    log.plain([(b"a", b"4"), (b"b", b"4")])  # supersedes the pending record
    log.plain([(b"b", b"u")], pid=7, txn=True)
    log.marker(7, commit=True)
    values = LatestValues()
    for batch in log.batches:
        values.add(batch)
    assert values.latest == {b"a": b"4", b"b": b"u"}
    assert values.pending == {}
