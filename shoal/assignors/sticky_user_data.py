"""User data of the sticky assignors, byte-compatible with the Java client and kafka-python.

- "sticky" (eager): StickyAssignorUserData v1 = [(topic, [partition])] + int32 generation
  (v0 lacks the generation). The member's previous assignment travels here because
  eager members revoke everything before joining, so owned_partitions is empty.
- "cooperative-sticky": one int32, the generation of the member's owned partitions.

The format is fixed by Kafka and not among the generated schemas, so it is coded here.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from .types import DEFAULT_GENERATION, TopicPartition

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_new_tp = tuple.__new__


def encode_sticky_user_data(partitions: Iterable[TopicPartition], generation: int | None) -> bytes:
    """StickyAssignorUserData v1 (v0 when generation is None)."""
    by_topic: dict[str, list[int]] = {}
    for topic, p in partitions:
        by_topic.setdefault(topic, []).append(p)
    out = bytearray(_I32.pack(len(by_topic)))
    for topic, parts in by_topic.items():
        raw = topic.encode()
        out += _I16.pack(len(raw))
        out += raw
        out += _I32.pack(len(parts))
        out += struct.pack(f">{len(parts)}i", *parts)
    if generation is not None:
        out += _I32.pack(generation)
    return bytes(out)


def decode_sticky_user_data(buf: bytes | memoryview | None) -> tuple[list[TopicPartition], int | None]:
    """(previous assignment, generation or None for v0). Unparseable data reads as empty, as in Java.

    Java writes the struct bare; kafka-python 3.x puts an int16 version in front. Both are read:
    the bare form must account for every byte, else the prefixed form is tried.
    """
    if not buf:
        return [], None
    mv = memoryview(buf)
    for start in (0, 2):
        parsed = _parse_sticky(mv, start)
        if parsed is not None:
            return parsed
    return [], None


def _parse_sticky(mv: memoryview, pos: int) -> tuple[list[TopicPartition], int | None] | None:
    try:
        (n_topics,) = _I32.unpack_from(mv, pos)
        pos += 4
        if n_topics < 0 or pos + 6 * n_topics > len(mv):
            return None
        out: list[TopicPartition] = []
        for _ in range(n_topics):
            (slen,) = _I16.unpack_from(mv, pos)
            pos += 2
            if slen < 0 or pos + slen > len(mv):
                return None
            topic = bytes(mv[pos : pos + slen]).decode()
            pos += slen
            (n,) = _I32.unpack_from(mv, pos)
            pos += 4
            if n < 0 or pos + 4 * n > len(mv):
                return None
            parts = struct.unpack_from(f">{n}i", mv, pos)
            pos += 4 * n
            out.extend(_new_tp(TopicPartition, (topic, p)) for p in parts)
    except (struct.error, UnicodeDecodeError):
        return None
    if len(mv) == pos + 4:
        return out, _I32.unpack_from(mv, pos)[0]
    if len(mv) == pos:
        return out, None
    return None


def encode_cooperative_user_data(generation: int) -> bytes:
    """CooperativeStickyAssignor user data: the int32 generation."""
    return _I32.pack(generation)


def decode_cooperative_user_data(buf: bytes | memoryview | None) -> int:
    """The generation in cooperative-sticky user data, or -1 if absent/short."""
    if buf is None or len(buf) < 4:
        return DEFAULT_GENERATION
    return _I32.unpack_from(buf, 0)[0]
