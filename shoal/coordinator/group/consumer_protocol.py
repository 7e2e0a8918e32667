"""The bits of the consumer embedded protocol the coordinator needs to read."""

from __future__ import annotations

import struct

from shoal.protocol.generated.consumer_protocol_subscription import ConsumerProtocolSubscription

CONSUMER_PROTOCOL_TYPE = "consumer"
_H = struct.Struct(">h")


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """Topics of a ConsumerProtocolSubscription blob, or None if it cannot be parsed."""
    try:
        version = _H.unpack_from(metadata, 0)[0]
        # Newer versions are readable as the highest we know (Kafka does the same).
        version = min(max(version, 0), ConsumerProtocolSubscription.MAX_VERSION)
        sub = ConsumerProtocolSubscription.decode(memoryview(metadata)[2:], version)
    except Exception:
        return None
    return set(sub.topics)
