"""The shoal Python client: producer, consumer (with group membership) and admin.

Each has an asyncio core (``AIOProducer``, ``AIOConsumer``, ``AIOAdminClient``) and a
synchronous face (``Producer``, ``Consumer``, ``AdminClient``) that runs the core on a
private event loop in a background thread; so has the share-group (KIP-932) consumer
(``AIOShareConsumer``, ``ShareConsumer``).  Configuration uses Kafka's property names.
"""

from .accumulator import RecordFuture
from .admin import AdminClient, AIOAdminClient, NewPartitions, NewTopic
from .consumer import AIOConsumer
from .errors import (
    ClientError,
    ClosedError,
    CommitFailedError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailableError,
    NoOffsetForPartitionError,
    RebalanceInProgressError,
)
from .listener import ConsumerRebalanceListener
from .partitioner import DefaultPartitioner, murmur2
from .producer import AIOProducer
from .share_consumer import AIOShareConsumer
from .share_session import AcknowledgeType, ShareConsumerRecord
from .share_sync import ShareConsumer
from .structs import ConsumerRecord, OffsetAndMetadata, RecordMetadata, TopicPartition
from .sync import Consumer, Producer

__all__ = [
    "AIOAdminClient",
    "AIOConsumer",
    "AIOProducer",
    "AIOShareConsumer",
    "AcknowledgeType",
    "AdminClient",
    "ClientError",
    "ClosedError",
    "CommitFailedError",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "DefaultPartitioner",
    "IllegalStateError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NewPartitions",
    "NewTopic",
    "NoBrokersAvailableError",
    "NoOffsetForPartitionError",
    "OffsetAndMetadata",
    "Producer",
    "RebalanceInProgressError",
    "RecordFuture",
    "RecordMetadata",
    "ShareConsumer",
    "ShareConsumerRecord",
    "TopicPartition",
    "murmur2",
]
