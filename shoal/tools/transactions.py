"""`shoal transactions`: the transactional state of a cluster over the wire, as kafka-transactions.

list                 ListTransactions sent to every broker (each coordinator knows its own ids).
describe             FindCoordinator (transaction) + DescribeTransactions.
describe-producers   DescribeProducers at the partition's leader (or --broker-id).
find-hanging         Open transactions (DescribeProducers) older than --max-transaction-timeout
                     whose coordinator does not list that partition in the producer's transaction.
abort                WriteTxnMarkers(ABORT) for the open transaction starting at --start-offset
                     (or named by --producer-id/--producer-epoch/--coordinator-epoch).

Output columns, order and tab-separated layout are kafka-transactions.sh's.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.clock import now_ms as wall_clock_ms
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.describe_producers_request import DescribeProducersRequest
from shoal.protocol.generated.describe_transactions_request import DescribeTransactionsRequest
from shoal.protocol.generated.list_transactions_request import ListTransactionsRequest
from shoal.protocol.generated.write_txn_markers_request import WriteTxnMarkersRequest
from shoal.tools.table import format_tab_table
from shoal.tools.wire import ToolClient, ToolError, check_error, error_name

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions")
PRODUCERS_HEADERS = ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset")
HANGING_HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)")


@dataclass(frozen=True)
class Producer:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    last_sequence: int
    last_timestamp: int
    txn_start_offset: int


def list_transactions(client: ToolClient, producer_ids: list[int] | None = None) -> list[tuple[str, int, int, str]]:
    """(transactional id, coordinator, producer id, state) from every broker."""
    rows = []
    for node in client.all_nodes():
        conn = client.node(node)
        resp = conn.send(ListTransactionsRequest(state_filters=[], producer_id_filters=producer_ids or []),
                         conn.version(ApiKey.LIST_TRANSACTIONS, 1))
        check_error(resp.error_code, f"listing the transactions of broker {node} failed")
        rows += [(t.transactional_id, node, t.producer_id, t.transaction_state) for t in resp.transaction_states]
    return rows


def format_list(rows: list[tuple[str, int, int, str]]) -> str:
    return format_tab_table(LIST_HEADERS, rows)


def describe_transaction(client: ToolClient, transactional_id: str, now_ms: int | None = None) -> list[object]:
    conn = client.find_coordinator(transactional_id, key_type=1)
    resp = conn.send(DescribeTransactionsRequest(transactional_ids=[transactional_id]), conn.version(ApiKey.DESCRIBE_TRANSACTIONS, 0))
    st = resp.transaction_states[0]
    check_error(st.error_code,
                f"Failed to describe transaction state of transactional-id `{transactional_id}`")
    now = wall_clock_ms() if now_ms is None else now_ms
    started = st.transaction_start_time_ms
    parts = ",".join(f"{t.topic}-{p}" for t in st.topics for p in t.partitions)
    return [client.last_coordinator, transactional_id, st.producer_id, st.producer_epoch, st.transaction_state,
            st.transaction_timeout_ms, started if started >= 0 else "None",
            now - started if started >= 0 else "None", parts]


def _leader(client: ToolClient, topic: str, partition: int) -> int:
    md = client.metadata([topic])
    for t in md.topics:
        if t.name == topic:
            check_error(t.error_code, f"topic {topic}")
            for p in t.partitions:
                if p.partition_index == partition:
                    return p.leader_id
    raise ToolError(f"partition {topic}-{partition} does not exist")


def describe_producers(client: ToolClient, partitions: list[tuple[str, int]], broker_id: int | None = None,
                       ) -> list[Producer]:
    """Active producers of each partition, asked of its leader (or ``broker_id``)."""
    by_node: dict[int, list[tuple[str, int]]] = {}
    for topic, p in partitions:
        by_node.setdefault(broker_id if broker_id is not None else _leader(client, topic, p), []).append((topic, p))
    out = []
    for node, tps in by_node.items():
        by_topic: dict[str, list[int]] = {}
        for topic, p in tps:
            by_topic.setdefault(topic, []).append(p)
        conn = client.node(node)
        resp = conn.send(DescribeProducersRequest(topics=[
            DescribeProducersRequest.TopicRequest(name=t, partition_indexes=ps) for t, ps in by_topic.items()]),
            conn.version(ApiKey.DESCRIBE_PRODUCERS, 0))
        for t in resp.topics:
            for p in t.partitions:
                check_error(p.error_code, "Failed to describe producers for partition "
                                          f"{t.name}-{p.partition_index} on broker {node}")
                out += [Producer(t.name, p.partition_index, s.producer_id, s.producer_epoch, s.coordinator_epoch,
                                 s.last_sequence, s.last_timestamp, s.current_txn_start_offset)
                        for s in p.active_producers]
    return out


def format_producers(producers: list[Producer]) -> str:
    return format_tab_table(PRODUCERS_HEADERS, [
        (s.producer_id, s.producer_epoch, s.coordinator_epoch, s.last_sequence, s.last_timestamp,
         s.txn_start_offset if s.txn_start_offset >= 0 else "None") for s in producers])


def find_hanging(client: ToolClient, *, broker_id: int | None, topic: str | None, partition: int | None,
                 max_transaction_timeout_min: int = 15, now_ms: int | None = None) -> list[Producer]:
    """Open transactions older than the largest timeout that their coordinator no longer tracks."""
    if topic is None and broker_id is None:
        raise ToolError("The `find-hanging` command requires either --topic or --broker-id to limit the scope "
                        "of the search")
    if partition is not None and topic is None:
        raise ToolError("The --partition argument requires --topic to be provided")
    if topic is not None and partition is not None:
        partitions = [(topic, partition)]
    else:
        md = client.metadata([topic] if topic is not None else None)
        partitions = [(t.name, p.partition_index) for t in md.topics if not t.error_code for p in t.partitions
                      if broker_id is None or broker_id in p.replica_nodes]
    now = wall_clock_ms() if now_ms is None else now_ms
    limit = max_transaction_timeout_min * 60_000
    candidates = [s for s in describe_producers(client, partitions, broker_id)
                  if s.txn_start_offset >= 0 and now - s.last_timestamp > limit]
    if not candidates:
        return []
    ids = {pid: tid for tid, _, pid, _ in list_transactions(client, sorted({c.producer_id for c in candidates}))}
    hanging = []
    for c in candidates:
        tid = ids.get(c.producer_id)
        if tid is None:
            hanging.append(c)
            continue
        conn = client.find_coordinator(tid, key_type=1)
        st = conn.send(DescribeTransactionsRequest(transactional_ids=[tid]), conn.version(ApiKey.DESCRIBE_TRANSACTIONS, 0)).transaction_states[0]
        if st.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            hanging.append(c)
        elif st.error_code:
            raise ToolError(f"Failed to describe transaction {tid!r}: {error_name(st.error_code)}")
        elif not any(t.topic == c.topic and c.partition in t.partitions for t in st.topics):
            hanging.append(c)
    return hanging


def format_hanging(hanging: list[Producer], now_ms: int | None = None) -> str:
    now = wall_clock_ms() if now_ms is None else now_ms
    return format_tab_table(HANGING_HEADERS, [
        (h.topic, h.partition, h.producer_id, h.producer_epoch, h.coordinator_epoch, h.txn_start_offset,
         h.last_timestamp, (now - h.last_timestamp) // 60_000) for h in hanging])


def abort_transaction(client: ToolClient, topic: str, partition: int, *, start_offset: int | None = None,
                      producer_id: int | None = None, producer_epoch: int | None = None,
                      coordinator_epoch: int | None = None) -> None:
    """Write an ABORT marker for one open transaction of a partition (KIP-664)."""
    if start_offset is None and producer_id is None:
        raise ToolError("The transaction to abort must be identified either with --start-offset (for brokers "
                        "on 3.0 or above) or with --producer-id, --producer-epoch, and --coordinator-epoch "
                        "(for older brokers)")
    if start_offset is not None:
        found = [s for s in describe_producers(client, [(topic, partition)]) if s.txn_start_offset == start_offset]
        if not found:
            raise ToolError(f"Could not find any open transactions starting at offset {start_offset} on "
                            f"partition {topic}-{partition}")
        producer_id, producer_epoch, coordinator_epoch = (found[0].producer_id, found[0].producer_epoch,
                                                          found[0].coordinator_epoch)
    if producer_epoch is None:
        raise ToolError("Missing required argument --producer-epoch")
    if coordinator_epoch is None:
        raise ToolError("Missing required argument --coordinator-epoch")
    assert producer_id is not None
    conn = client.node(_leader(client, topic, partition))
    resp = conn.send(WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
        coordinator_epoch=max(coordinator_epoch, 0),
        topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=topic, partition_indexes=[partition])])]),
        conn.version(ApiKey.WRITE_TXN_MARKERS, 1))
    check_error(resp.markers[0].topics[0].partitions[0].error_code,
                f"Failed to abort the transaction of producer {producer_id} on {topic}-{partition}")
