"""What simulated clients say on the wire: request builders and a client base with routing.

Requests are the generated codec's message objects at fixed versions; the network encodes them
into real frames, so the broker parses exactly what a Kafka client would send.
"""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING, Any

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.fetch_request import FetchRequest
from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from shoal.protocol.generated.init_producer_id_request import InitProducerIdRequest
from shoal.protocol.generated.metadata_request import MetadataRequest
from shoal.protocol.generated.offset_commit_request import OffsetCommitRequest
from shoal.protocol.generated.offset_delete_request import OffsetDeleteRequest
from shoal.protocol.generated.offset_fetch_request import OffsetFetchRequest
from shoal.protocol.generated.produce_request import ProduceRequest

if TYPE_CHECKING:
    from shoal.sim.network import ClientConnection, SimNetwork
    from shoal.sim.trace import Trace

# One version per API: recent, but before topic ids replace topic names (Fetch 13, DeleteTopics 6)
# and before batched coordinator lookups (FindCoordinator 4, OffsetFetch 8).
VERSIONS = {
    ApiKey.PRODUCE: 9, ApiKey.FETCH: 11, ApiKey.METADATA: 12, ApiKey.FIND_COORDINATOR: 3,
    ApiKey.OFFSET_COMMIT: 8, ApiKey.OFFSET_FETCH: 7, ApiKey.OFFSET_DELETE: 0, ApiKey.INIT_PRODUCER_ID: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 3, ApiKey.END_TXN: 3, ApiKey.JOIN_GROUP: 5, ApiKey.SYNC_GROUP: 3,
    ApiKey.HEARTBEAT: 3, ApiKey.LEAVE_GROUP: 3, ApiKey.CONSUMER_GROUP_HEARTBEAT: 1,
    ApiKey.CREATE_TOPICS: 7, ApiKey.DELETE_TOPICS: 5, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_RECORDS: 2,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: 1, ApiKey.DESCRIBE_CONFIGS: 4,
    ApiKey.SHARE_GROUP_HEARTBEAT: 1, ApiKey.SHARE_FETCH: 1,
}

REQUEST_TIMEOUT_S = 1.5

# Errors after which a client refreshes where to go and tries again.
RETRY_ELSEWHERE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.KAFKA_STORAGE_ERROR, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
})


def produce_request(topic: str, partition: int, records: bytes, acks: int) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)])])


def fetch_request(topic: str, partition: int, offset: int, *, max_wait_ms: int, isolation: int = 0) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20,
                        isolation_level=isolation, session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                            topic=topic, partitions=[FetchRequest.FetchPartition(
                                partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20)])])


def metadata_request(topics: list[str]) -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                           allow_auto_topic_creation=False)


def find_coordinator_request(group: str) -> FindCoordinatorRequest:
    return FindCoordinatorRequest(key=group, key_type=0)


def init_producer_id_request() -> InitProducerIdRequest:
    return InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000,
                                 producer_id=-1, producer_epoch=-1)


def offset_commit_request(group: str, topic: str, partition: int, offset: int) -> OffsetCommitRequest:
    # A standalone ("simple") commit: no member, generation -1, as a consumer with assign() commits.
    return OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                               group_instance_id=None, topics=[OffsetCommitRequest.OffsetCommitRequestTopic(
                                   name=topic, partitions=[OffsetCommitRequest.OffsetCommitRequestPartition(
                                       partition_index=partition, committed_offset=offset,
                                       committed_leader_epoch=-1, committed_metadata="")])])


def offset_fetch_request(group: str, topic: str, partition: int) -> OffsetFetchRequest:
    return OffsetFetchRequest(group_id=group, require_stable=True, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name=topic, partition_indexes=[partition])])


def offset_delete_request(group: str, topic: str, partition: int) -> OffsetDeleteRequest:
    return OffsetDeleteRequest(group_id=group, topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
        name=topic, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=partition)])])


class SimClient:
    """A simulated client: one connection per node, a metadata cache, and retries with back-off
    on network failures (a failed connection is replaced by a new one)."""

    def __init__(self, name: str, network: SimNetwork, rng: random.Random, trace: Trace,
                 bootstrap: list[int]) -> None:
        self.name = name
        self.network = network
        self.rng = rng
        self.trace = trace
        self.bootstrap = bootstrap
        self._conns: dict[int, ClientConnection] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.coordinators: dict[str, int] = {}

    def conn(self, node_id: int) -> ClientConnection:
        c = self._conns.get(node_id)
        if c is None or c.closed:
            c = self._conns[node_id] = self.network.connect(node_id, self.name)
        return c

    async def call(self, node_id: int, api_key: ApiKey, request: Any) -> Any:
        """One attempt; raises `shoal.sim.network.NetworkError` on no answer, after forgetting
        what the client knew of that node: as Kafka's clients do on a disconnect or a timeout, the
        partitions it led and the coordinators it was are looked up again (a crashed node's
        partitions are found on their new leaders instead of waiting for it to come back)."""
        from shoal.sim.network import NetworkError

        try:
            return await self.conn(node_id).call(api_key, VERSIONS[api_key], request, REQUEST_TIMEOUT_S)
        except NetworkError:
            for tp in [tp for tp, leader in self.leaders.items() if leader == node_id]:
                del self.leaders[tp]
            for key in [key for key, node in self.coordinators.items() if node == node_id]:
                del self.coordinators[key]
            raise

    async def backoff(self) -> None:
        await asyncio.sleep(self.rng.uniform(0.05, 0.3))

    async def any_node_call(self, api_key: ApiKey, request: Any) -> Any:
        """Ask any node (tried in a seeded order until one answers)."""
        from shoal.sim.network import NetworkError

        while True:
            for node_id in self.rng.sample(self.bootstrap, len(self.bootstrap)):
                try:
                    return await self.call(node_id, api_key, request)
                except NetworkError:
                    continue
            await self.backoff()

    async def refresh_metadata(self, topic: str) -> None:
        resp = await self.any_node_call(ApiKey.METADATA, metadata_request([topic]))
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code == 0 and p.leader_id >= 0:
                    self.leaders[(t.name, p.partition_index)] = p.leader_id

    async def leader(self, topic: str, partition: int) -> int:
        while (topic, partition) not in self.leaders:
            await self.refresh_metadata(topic)
            if (topic, partition) not in self.leaders:
                await self.backoff()
        return self.leaders[(topic, partition)]

    async def coordinator_call(self, group: str, api_key: ApiKey, request: Any, attempts: int) -> Any | None:
        """A request to ``group``'s coordinator, retried while the coordinator moves or the network fails;
        None if no attempt got an answer to keep."""
        from shoal.sim.network import NetworkError

        for _ in range(attempts):
            node = await self.coordinator(group)
            try:
                resp = await self.call(node, api_key, request)
            except NetworkError:
                await self.backoff()
                continue
            if error_of(resp) in RETRY_ELSEWHERE:
                self.coordinators.pop(group, None)
                await self.backoff()
                continue
            return resp
        return None

    async def coordinator(self, group: str) -> int:
        while group not in self.coordinators:
            resp = await self.any_node_call(ApiKey.FIND_COORDINATOR, find_coordinator_request(group))
            if resp.error_code == 0:
                self.coordinators[group] = resp.node_id
            else:
                await self.backoff()
        return self.coordinators[group]


def error_of(resp: Any) -> int:
    """A group answer's error: its top-level code, else the first partition's."""
    code = getattr(resp, "error_code", 0)
    if code:
        return int(code)
    for t in getattr(resp, "topics", None) or []:
        for p in t.partitions:
            if p.error_code:
                return int(p.error_code)
    return 0
