"""A deterministic set of records, and the check that they came back intact.

Records carry keys (some null), values (some null, some binary, one large),
headers (some repeated, some with null values) and explicit timestamps, and
are spread over partitions so order can be checked per partition.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
BASE_TS = 1_700_000_000_000


@dataclass(frozen=True)
class Rec:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def make_records(n: int = 60, partitions: int = 3, seed: int = 7, headers: bool = True,
                 null_header_values: bool = True) -> list[Rec]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else f"key-{i}".encode()
        if i % 11 == 5 and key is not None:
            value = None
        elif i == 13:
            value = bytes(rng.randrange(256) for _ in range(70_000))
        else:
            value = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
        hdrs: tuple[tuple[str, bytes | None], ...] = ()
        if headers and i % 3 == 0:
            hdrs = (("h1", f"v{i}".encode()), ("h1", b"again"))
            if null_header_values and i % 2 == 0:
                hdrs += (("nul", None),)
        out.append(Rec(i % partitions, key, value, hdrs, BASE_TS + i * 1000))
    return out


def by_partition(recs: list[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}
    for r in recs:
        out.setdefault(r.partition, []).append(r)
    return out


def assert_same(expected: list[Rec], got: list[Rec], check_headers: bool = True) -> None:
    """Byte-identical records, in order within each partition."""
    exp, act = by_partition(expected), by_partition(got)
    assert sorted(act) == sorted(exp), f"partitions {sorted(act)} != {sorted(exp)}"
    for p in exp:
        assert len(act[p]) == len(exp[p]), f"partition {p}: {len(act[p])} records, expected {len(exp[p])}"
        for i, (e, a) in enumerate(zip(exp[p], act[p], strict=True)):
            where = f"partition {p} record {i}"
            assert a.key == e.key, f"{where}: key {a.key!r} != {e.key!r}"
            assert a.value == e.value, f"{where}: value differs"
            assert a.timestamp == e.timestamp, f"{where}: timestamp {a.timestamp} != {e.timestamp}"
            if check_headers:
                assert tuple(a.headers) == tuple(e.headers), f"{where}: headers {a.headers} != {e.headers}"
