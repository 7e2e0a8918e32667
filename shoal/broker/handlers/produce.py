"""Produce: validate the batches' headers and CRCs, assign offsets in place, append.

Bytes stay bytes: base offsets are written in place in the request's own
buffer (the CRC does not cover them). Every record of every batch is walked
once, compressed batches decompressed (bounded), as Kafka's LogValidator
does, without building a record object.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import allowed, filter_allowed
from shoal.broker.connection import CloseConnection
from shoal.broker.metadata import INTERNAL_TOPICS
from shoal.clock import now_ms
from shoal.coordinator.txn.responses import for_version
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.compression import ZSTD
from shoal.protocol.errors import ErrorCode, error_code_of
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.produce_response import ProduceResponse
from shoal.protocol.legacy_records import parse_message_set
from shoal.protocol.record_batch import BatchHeader, InvalidRecordError, RecordBatchError, validate_batches
from shoal.protocol.record_checks import RecordError, validate_records
from shoal.protocol.record_encode import build_batch
from shoal.storage.errors import StorageError
from shoal.storage.producer_state import AppendOrigin, ProducerStateError

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.protocol.generated.produce_request import ProduceRequest
    from shoal.storage import PartitionLog

log = logging.getLogger(__name__)

PartitionResponse = ProduceResponse.PartitionProduceResponse
TopicResponse = ProduceResponse.TopicProduceResponse


def _error(index: int, code: ErrorCode, message: str | None = None) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                             log_start_offset=-1, error_message=message)


def _record_errors(index: int, topic: str, errors: list[RecordError],
                   lowest_highest: tuple[int, int] | None) -> PartitionResponse:
    """Kafka's answer to records refused one by one (LogValidator.processRecordErrors, KIP-467):
    the batch is refused, each record named by its index; INVALID_TIMESTAMP if any timestamp is
    out of bounds, else INVALID_RECORD."""
    where = f"{topic}-{index}"
    listed = []
    for e in errors:
        if e.missing_key:
            text = f"Compacted topic cannot accept message without key in topic partition {where}"
        else:
            lowest, highest = lowest_highest
            text = (f"Timestamp {e.timestamp} of message with offset {e.index} is out of range. "
                    f"The timestamp should be within [{lowest}, {highest}]")
        listed.append(ProduceResponse.BatchIndexAndErrorMessage(batch_index=e.index, batch_index_error_message=text))
    if any(not e.missing_key for e in errors):
        code, message = ErrorCode.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp"
    else:
        shown = ", ".join(f"RecordError(batchIndex={r.batch_index}, message='{r.batch_index_error_message}')"
                          for r in listed[:3])
        code = ErrorCode.INVALID_RECORD
        message = (f"One or more records have been rejected due to {len(listed)} record errors in total, "
                   f"and only showing the first three errors at most: [{shown}]")
    return PartitionResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                             log_start_offset=-1, record_errors=listed, error_message=message)


def upconvert(message_set, max_message_bytes: int) -> bytearray:
    """A produced message set (Produce v0-v2) as one v2 batch: the same records, keys, values and
    CreateTime timestamps (none in magic 0), the same compression codec."""
    messages, codec = parse_message_set(message_set, max_decompressed=min(64 * max_message_bytes, 0x7FFFFFFF))
    if not messages:
        raise InvalidRecordError("produce request carries no message")
    return bytearray(build_batch([(m.timestamp, m.key, m.value, []) for m in messages], compression=codec))


def _leader_log(ctx: RequestContext, topic: str, index: int) -> PartitionLog | PartitionResponse:
    """The partition's log if this node may append to it, else the error answer."""
    metadata = ctx.broker.metadata
    info = metadata.topics.get(topic)
    if info is None or not 0 <= index < info.num_partitions:
        return _error(index, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if topic in INTERNAL_TOPICS:
        return _error(index, ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic}")
    if metadata.leader(topic, index) != ctx.node.node_id:
        return _error(index, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    return ctx.broker.partition_log(topic, index)


def _validate(ctx: RequestContext, plog: PartitionLog, topic: str, index: int, records,  # noqa: ANN001
              now: int) -> tuple[bytearray, list[BatchHeader]] | PartitionResponse:
    """The produced records as v2 batches ready to append (and their headers), or the error answer.
    Raises RecordBatchError for what the batches' bytes break."""
    if records is None:
        raise InvalidRecordError("produce request carries null records")
    if ctx.api_version < 3:  # a message set (magic 0/1): up-converted to one v2 batch, as Kafka 3.x
        records = upconvert(records, plog.config.max_message_bytes)
    headers = validate_batches(records, plog.config.max_message_bytes)
    if len(headers) > 1:  # Kafka's LogValidator: one v2 batch per partition per request
        raise InvalidRecordError("Compressed outer record has more than one batch")
    if ctx.api_version < 7 and any(h.compression == ZSTD for h in headers):
        return _error(index, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                      "Produce requests with ZStandard compression are only supported on version 7+")
    # Every record is read before anything is stored: a batch whose CRC holds but whose
    # records do not parse would otherwise poison the partition for every reader.
    timestamp_range = plog.config.timestamp_range(now)
    refused = validate_records(records, headers, key_required=plog.config.compact,
                               timestamp_range=timestamp_range,
                               max_decompressed=min(64 * plog.config.max_message_bytes, 0x7FFFFFFF))
    if refused:
        return _record_errors(index, topic, refused, timestamp_range)
    # The request frame is ours and writable: the log assigns offsets in place, no copy.
    return records, headers


def _transactional_error(ctx: RequestContext, transactional_id: str | None, headers: list[BatchHeader],
                         topic: str, index: int, plog: PartitionLog) -> PartitionResponse | None:
    """The error answer if a transactional batch may not be written, else None."""
    for h in headers:
        if not h.is_transactional:
            continue
        if transactional_id is None:  # as Kafka: transactional records need a transactional id
            return _error(index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                          "transactional records without a transactional id")
        code = _verify_transactional_write(ctx, transactional_id, h, topic, index, plog)
        if code != ErrorCode.NONE:
            return _error(index, code)
    return None


def _verify_transactional_write(ctx: RequestContext, transactional_id: str, h: BatchHeader, topic: str,
                                partition: int, plog: PartitionLog) -> ErrorCode:
    """KIP-890 part 1: the first transactional batch of a producer in a partition must belong to
    its open transaction, so a late batch cannot start a transaction nobody will end."""
    entry = plog.producer_state.producers.get(h.producer_id)
    if entry is not None and entry.current_txn_first_offset >= 0 and entry.epoch == h.producer_epoch:
        return ErrorCode.NONE
    code = ctx.broker.txn_coordinators.verify(transactional_id, h.producer_id, h.producer_epoch, topic, partition)
    if code == ErrorCode.NONE:
        return code
    if code == ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if code in (ErrorCode.TRANSACTION_ABORTABLE, ErrorCode.INVALID_PRODUCER_ID_MAPPING):
        return for_version(ApiKey.PRODUCE, ctx.api_version, ErrorCode.TRANSACTION_ABORTABLE)
    return ErrorCode.NOT_ENOUGH_REPLICAS  # coordinator busy or moving: retriable for every client


def append(ctx: RequestContext, transactional_id: str | None, topic: str, index: int, records,  # noqa: ANN001
           now: int) -> PartitionResponse:
    """Validate and append one partition's records; its answer."""
    plog = _leader_log(ctx, topic, index)
    if isinstance(plog, PartitionResponse):
        return plog
    try:
        validated = _validate(ctx, plog, topic, index, records, now)
    except RecordBatchError as e:
        return _error(index, error_code_of(e), str(e))
    if isinstance(validated, PartitionResponse):
        return validated
    buf, headers = validated
    refused = _transactional_error(ctx, transactional_id, headers, topic, index, plog)
    if refused is not None:
        return refused
    try:
        result = plog.append(buf, now, headers=headers, origin=AppendOrigin.CLIENT)
    except ProducerStateError as e:
        log.info("produce to %s-%d refused: %s", topic, index, e)
        return _error(index, error_code_of(e), str(e))
    except StorageError as e:  # KAFKA_STORAGE_ERROR: retriable; nothing of the batch was kept
        log.warning("produce to %s-%d failed: %s", topic, index, e)
        return _error(index, error_code_of(e), str(e))
    if not result.duplicate:  # a retry of a batch already appended gets the offsets it got then
        ctx.broker.fetch_waiters.notify(topic, index)
        ctx.broker.metrics.produced(topic, len(buf), sum(h.records_count for h in headers))
    return PartitionResponse(index=index, error_code=ErrorCode.NONE, base_offset=result.base_offset,
                             log_append_time_ms=result.log_append_time, log_start_offset=plog.log_start_offset)


# The transactional id's WRITE is checked only when the request carries one (Kafka's KafkaApis).
@handles(ApiKey.PRODUCE, access=(Access(ResourceType.TOPIC, AclOperation.WRITE),
                                 Access(ResourceType.TRANSACTIONAL_ID, AclOperation.WRITE)))
async def produce(ctx: RequestContext, req: ProduceRequest) -> ProduceResponse | None:
    now = now_ms()
    acks = req.acks
    metrics = ctx.broker.metrics
    # a transactional producer needs its transactional id's WRITE (else every partition fails),
    # and each topic its WRITE (else its partitions fail), checked before the topic's existence
    txn_denied = req.transactional_id is not None and not allowed(
        ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id)
    writable = filter_allowed(ctx, AclOperation.WRITE, ResourceType.TOPIC, (t.name for t in req.topic_data))
    responses = []
    for topic_data in req.topic_data:
        parts = []
        for pd in topic_data.partition_data:
            if txn_denied:
                parts.append(_error(pd.index, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            elif topic_data.name not in writable:
                parts.append(_error(pd.index, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            elif acks not in (0, 1, -1):
                parts.append(_error(pd.index, ErrorCode.INVALID_REQUIRED_ACKS))
            else:
                parts.append(append(ctx, req.transactional_id, topic_data.name, pd.index, pd.records, now))
            metrics.produce_requests[topic_data.name] += 1
            if parts[-1].error_code:
                metrics.failed_produce_requests[topic_data.name] += 1
        responses.append(TopicResponse(name=topic_data.name, partition_responses=parts))
    if acks == 0:
        _close_on_error(responses)
        return None
    return ProduceResponse(responses=responses, throttle_time_ms=0)


def _close_on_error(responses: list[TopicResponse]) -> None:
    """No response for acks=0; Kafka closes the connection on an error so the producer learns
    of it (it refreshes metadata on reconnect)."""
    for t in responses:
        for p in t.partition_responses:
            if p.error_code != ErrorCode.NONE:
                raise CloseConnection(f"acks=0 produce to {t.name}-{p.index} failed: {ErrorCode(p.error_code).name}")
