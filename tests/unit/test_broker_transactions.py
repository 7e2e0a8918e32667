"""The broker's transaction APIs over a real socket: what is advertised (transaction version 1 only),
and the produce-side checks (no transactional records without a transactional id; KIP-890 part 1)."""

from __future__ import annotations

import asyncio

from shoal.protocol.errors import ErrorCode as E
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.api_versions_request import ApiVersionsRequest
from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from shoal.protocol.generated.init_producer_id_request import InitProducerIdRequest
from shoal.protocol.generated.produce_request import ProduceRequest
from shoal.protocol.record_encode import build_batch
from tests.unit.broker_harness import RawClient, running_broker


def _produce(tid: str | None, pid: int, epoch: int, topic: str = "t") -> ProduceRequest:
    batch = build_batch([(1, None, b"v", None)], producer_id=pid, producer_epoch=epoch, base_sequence=0,
                        is_transactional=True)
    return ProduceRequest(transactional_id=tid, acks=-1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])])


async def _scenario(tmp_path) -> None:
    async with running_broker(tmp_path) as broker:
        port = broker.nodes[broker.node_ids[0]].port
        c = await RawClient.connect(port)
        versions = await c.call(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        ranges = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
        # Transaction version 2 (KIP-890 part 2) is not implemented, so it is not advertised.
        assert ranges[ApiKey.END_TXN][1] == 4 and ranges[ApiKey.PRODUCE][1] <= 11 and ranges[ApiKey.TXN_OFFSET_COMMIT][1] <= 4
        assert {ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN,
                ApiKey.WRITE_TXN_MARKERS, ApiKey.TXN_OFFSET_COMMIT, ApiKey.DESCRIBE_PRODUCERS,
                ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS} <= set(ranges)
        assert not versions.finalized_features
        broker.create_topic("t", 1, 1)
        found = await c.call(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="tx", key_type=1))
        assert found.error_code == 0
        init = await c.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000,
                                                        producer_id=-1, producer_epoch=-1))
        for _ in range(50):  # the coordinator partition may still be loading
            if init.error_code != E.COORDINATOR_LOAD_IN_PROGRESS:
                break
            await asyncio.sleep(0.05)
            init = await c.call(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000,
                                                            producer_id=-1, producer_epoch=-1))
        assert init.error_code == 0
        # Transactional records need a transactional id ...
        r = await c.call(ApiKey.PRODUCE, 9, _produce(None, init.producer_id, init.producer_epoch))
        assert r.responses[0].partition_responses[0].error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        # ... and a partition added to the producer's open transaction (KIP-890 part 1).
        r = await c.call(ApiKey.PRODUCE, 9, _produce("tx", init.producer_id, init.producer_epoch))
        assert r.responses[0].partition_responses[0].error_code == E.INVALID_TXN_STATE
        r = await c.call(ApiKey.PRODUCE, 11, _produce("tx", init.producer_id, init.producer_epoch))
        assert r.responses[0].partition_responses[0].error_code == E.TRANSACTION_ABORTABLE
        assert broker.partition_log("t", 0).log_end_offset == 0
        await c.close()


def test_transaction_apis_and_produce_checks(tmp_path) -> None:
    asyncio.run(asyncio.wait_for(_scenario(tmp_path), 30))
