"""Orderings that make the server-side assignors reproduce Kafka's group coordinator.

Kafka's assignors are written in Java, so where they iterate or sort they use Java's orders:
`String.compareTo` (UTF-16 code units), `Uuid.compareTo` (signed 64-bit halves) and, in one
place, the bucket order of a `java.util.HashSet<Uuid>`. Re-creating those orders here is what
lets Kafka's own worked examples hold for shoal verbatim, and every one of them is a pure
function of the ids, so the output never depends on Python's per-process string hash seed.
"""

from __future__ import annotations

from collections.abc import Iterable
from uuid import UUID

_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= (1 << 63) else value


def java_string_key(text: str) -> bytes:
    """A sort key ordering strings as Java's `String.compareTo` does.

    Java compares UTF-16 code units; Python compares code points. They disagree only when a
    character above U+FFFF meets one in U+E000..U+FFFF, but member and instance ids are free
    text, so sort on the big-endian UTF-16 bytes (whose byte order is code-unit order)."""
    return text.encode("utf-16-be", "surrogatepass")


def uuid_key(topic_id: UUID) -> tuple[int, int]:
    """A sort key ordering topic ids as Kafka's `Uuid.compareTo`: most significant 64 bits
    first, each half compared as a signed Java long (so ids with the top bit set sort first)."""
    value = topic_id.int
    return _signed64(value >> 64), _signed64(value & _MASK64)


def _java_uuid_hash(topic_id: UUID) -> int:
    # Kafka's Uuid.hashCode: xor the halves, then xor the two 32-bit words of that.
    hilo = (topic_id.int >> 64) ^ (topic_id.int & _MASK64)
    return ((hilo >> 32) ^ hilo) & _MASK32


def java_hash_set_order(topic_ids: Iterable[UUID]) -> list[UUID]:
    """Topic ids in the order `new java.util.HashSet<>(ids)` iterates them.

    Kafka's homogeneous uniform builder lists unassigned partitions topic by topic in this
    order, so which member gets which partition depends on it. A HashSet built from a
    collection of n elements has a table of the next power of two >= max(n / 0.75 + 1, 16)
    buckets; it iterates buckets in index order, and a key's bucket is its spread hash
    (h ^ h >>> 16) masked to the table size. Keys sharing a bucket iterate in insertion order
    in Java, which is not a property of the set; we break those (rare) ties by `uuid_key`.
    """
    ids = sorted(set(topic_ids), key=uuid_key)
    wanted = max(int(len(ids) / 0.75) + 1, 16)
    table_size = 1 << (wanted - 1).bit_length()

    def bucket(topic_id: UUID) -> int:
        h = _java_uuid_hash(topic_id)
        return (h ^ (h >> 16)) & (table_size - 1)

    # sorted() is stable, so ids in one bucket keep their uuid_key order.
    return sorted(ids, key=bucket)
