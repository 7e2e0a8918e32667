"""shoal bugs found by the differential conformance run, each pinned against shoal alone.

Each test failed before its fix and states Kafka 4.4.0's observed answer.
"""

from __future__ import annotations

import uuid

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.create_topics_request import CreateTopicsRequest as CT
from shoal.protocol.generated.sync_group_request import SyncGroupRequest
from shoal.testing.process import BrokerProcess
from tests.reference.conformance import connect


def test_refused_create_topic_echoes_empty_configs_not_null(shoal_reference: BrokerProcess) -> None:
    """Kafka answers a refused topic (v5+) with ``configs=[]``; shoal sent null."""
    conn = connect(shoal_reference.bootstrap_servers)
    try:
        for name in ("bad name!", f"fix-{uuid.uuid4().hex[:8]}"):
            req = CT(topics=[CT.CreatableTopic(name=name, num_partitions=-5, replication_factor=1)],
                     timeout_ms=5000, validate_only=True)
            resp = conn.send(req, 7)
            assert resp.topics[0].error_code != ErrorCode.NONE
            assert resp.topics[0].configs == []
    finally:
        conn.close()


def test_sync_group_v5_without_protocol_is_inconsistent(shoal_reference: BrokerProcess) -> None:
    """From SyncGroup v5 protocol type and name are mandatory: Kafka answers INCONSISTENT_GROUP_PROTOCOL
    before looking at the group (shoal answered UNKNOWN_MEMBER_ID for an unknown group)."""
    conn = connect(shoal_reference.bootstrap_servers)
    try:
        group = f"fix-{uuid.uuid4().hex[:8]}"
        from tests.reference.conformance import warm_up

        warm_up(conn, {"group": group})
        bare = SyncGroupRequest(group_id=group, generation_id=1, member_id="nobody", assignments=[])
        assert conn.send(bare, 5).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert conn.send(bare, 4).error_code == ErrorCode.UNKNOWN_MEMBER_ID  # v4 has no such fields
        bare.protocol_type, bare.protocol_name = "consumer", "range"
        assert conn.send(bare, 5).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        conn.close()


def test_empty_group_id_is_invalid_for_heartbeat_sync_and_leave(shoal_reference: BrokerProcess) -> None:
    """Kafka answers INVALID_GROUP_ID to an empty group id (shoal answered UNKNOWN_MEMBER_ID)."""
    from shoal.protocol.generated.heartbeat_request import HeartbeatRequest
    from shoal.protocol.generated.leave_group_request import LeaveGroupRequest

    conn = connect(shoal_reference.bootstrap_servers)
    try:
        hb = HeartbeatRequest(group_id="", generation_id=1, member_id="nobody")
        assert conn.send(hb, 4).error_code == ErrorCode.INVALID_GROUP_ID
        sync = SyncGroupRequest(group_id="", generation_id=1, member_id="nobody", protocol_type="consumer",
                                protocol_name="range", assignments=[])
        assert conn.send(sync, 5).error_code == ErrorCode.INVALID_GROUP_ID
        leave = LeaveGroupRequest(members=[LeaveGroupRequest.MemberIdentity(member_id="nobody")])
        resp = conn.send(leave, 5)
        assert (resp.error_code, resp.members) == (ErrorCode.INVALID_GROUP_ID, [])
    finally:
        conn.close()


def test_offset_commit_to_missing_partition_is_refused(shoal_reference: BrokerProcess) -> None:
    """Kafka answers UNKNOWN_TOPIC_OR_PARTITION for a partition the topic does not have (shoal stored it),
    in the same topic entry as the partitions it accepts."""
    from shoal.protocol.generated.offset_commit_request import OffsetCommitRequest as OC

    conn = connect(shoal_reference.bootstrap_servers)
    try:
        run = uuid.uuid4().hex[:8]
        topic, group = f"fix-{run}", f"fix-{run}-g"
        conn.send(CT(topics=[CT.CreatableTopic(name=topic, num_partitions=2, replication_factor=1)],
                     timeout_ms=5000))
        from tests.reference.conformance import warm_up

        warm_up(conn, {"group": group})
        req = OC(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
            OC.OffsetCommitRequestTopic(name=topic, partitions=[
                OC.OffsetCommitRequestPartition(partition_index=i, committed_offset=0) for i in (0, 9)])])
        resp = conn.send(req, 8)
        assert len(resp.topics) == 1
        got = {p.partition_index: p.error_code for p in resp.topics[0].partitions}
        assert got == {0: ErrorCode.NONE, 9: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    finally:
        conn.close()
