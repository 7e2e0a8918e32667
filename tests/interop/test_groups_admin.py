"""Group administration against shoal: confluent-kafka's AdminClient and kafka-python's KafkaAdminClient.

DescribeGroups, ListGroups (with a state filter), DeleteGroups (refused for a
group with members), OffsetFetch, OffsetCommit from an admin (only for an
empty group) and OffsetDelete (refused for a topic the group subscribes to).
"""

from __future__ import annotations

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka import TopicPartition as CkTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition
from kafka import errors as kp_errors

from tests.interop.group_helpers import (
    committed_offsets,
    create_topic,
    describe_group,
    kafka_conf,
    members,  # noqa: F401 - fixture
    produce,
    wait_until,
)

PARTS = 3
TOTAL = 30


def _setup(shoal, members, topic: str) -> dict[tuple[str, int], int]:  # noqa: F811
    """A live group `live` consuming `topic`, and an empty group `empty` with 12 records committed.

    Returns the empty group's committed offsets.
    """
    bs = shoal.bootstrap
    create_topic(bs, topic, PARTS)
    produce(bs, topic, PARTS, TOTAL)
    empty = members.start("e0", "confluent", bs, "empty", [topic], kafka_conf("confluent"), commit=True,
                          stop_after=12)
    wait_until(lambda: empty.of("closed"), 30, "the empty group's member consumed and closed")
    committed = committed_offsets(bs, "empty")
    assert committed == empty.committed and sum(committed.values()) == 12
    live = members.start("l0", "confluent", bs, "live", [topic], kafka_conf("confluent", "range"), commit=True)
    wait_until(lambda: len(live.records) == TOTAL, 30, "the live group consumed everything")
    wait_until(lambda: describe_group(bs, "live").state == "STABLE", 10, "live group stable")
    return committed


def _alter_error(fut) -> int:
    """The error code of a one-partition alter_consumer_group_offsets, however librdkafka reports it."""
    try:
        got = fut.result(15)
    except KafkaException as e:
        return e.args[0].code()
    [tp] = got.topic_partitions
    return tp.error.code() if tp.error else KafkaError.NO_ERROR


def test_confluent_admin_groups(shoal, members):  # noqa: F811
    topic = "adm-ck"
    before = _setup(shoal, members, topic)
    tp0 = next(iter(before))
    admin = AdminClient({"bootstrap.servers": shoal.bootstrap})

    listed = admin.list_consumer_groups(request_timeout=10).result(15)
    assert not listed.errors, listed.errors
    by_id = {g.group_id: g for g in listed.valid}
    assert {"live", "empty"} <= set(by_id)
    assert by_id["live"].state == ConsumerGroupState.STABLE
    assert by_id["empty"].state == ConsumerGroupState.EMPTY
    assert not by_id["live"].is_simple_consumer_group
    stable = admin.list_consumer_groups(request_timeout=10, states={ConsumerGroupState.STABLE}).result(15)
    assert {g.group_id for g in stable.valid} == {"live"}
    empties = admin.list_consumer_groups(request_timeout=10, states={ConsumerGroupState.EMPTY}).result(15)
    assert {g.group_id for g in empties.valid} == {"empty"}

    descs = admin.describe_consumer_groups(["live", "empty"], request_timeout=10)
    live = descs["live"].result(15)
    assert live.state == ConsumerGroupState.STABLE
    assert live.partition_assignor == "range"
    assert [m.client_id for m in live.members] == ["l0"]
    assert {(tp.topic, tp.partition) for tp in live.members[0].assignment.topic_partitions} == {
        (topic, p) for p in range(PARTS)}
    empty = descs["empty"].result(15)
    assert empty.state == ConsumerGroupState.EMPTY
    assert empty.members == []

    # An admin's commit goes through for an empty group, not for one with members.
    res = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("empty", [CkTopicPartition(*tp0, 1)])], request_timeout=10)
    res["empty"].result(15)
    assert committed_offsets(shoal.bootstrap, "empty") == {**before, tp0: 1}
    res = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("live", [CkTopicPartition(topic, 0, 1)])], request_timeout=10)
    assert _alter_error(res["live"]) == KafkaError.UNKNOWN_MEMBER_ID
    assert committed_offsets(shoal.bootstrap, "live")[(topic, 0)] == TOTAL // PARTS

    # A group with members cannot be deleted; an empty one can, with its offsets.
    res = admin.delete_consumer_groups(["live", "empty"], request_timeout=10)
    with pytest.raises(KafkaException) as err:
        res["live"].result(15)
    assert err.value.args[0].code() == KafkaError.NON_EMPTY_GROUP, err.value
    res["empty"].result(15)
    listed = admin.list_consumer_groups(request_timeout=10).result(15)
    assert {g.group_id for g in listed.valid} == {"live"}
    assert committed_offsets(shoal.bootstrap, "empty") == {}
    assert describe_group(shoal.bootstrap, "live").state == "STABLE"


def test_kafka_python_admin_groups(shoal, members):  # noqa: F811
    topic = "adm-kp"
    before = _setup(shoal, members, topic)
    admin = KafkaAdminClient(bootstrap_servers=shoal.bootstrap)
    try:
        groups = {g["group_id"]: g for g in admin.list_groups()}
        assert {"live", "empty"} <= set(groups)
        assert groups["live"]["protocol_type"] == "consumer"
        assert {g["group_id"] for g in admin.list_groups(states_filter=["Stable"])} == {"live"}
        assert {g["group_id"] for g in admin.list_groups(states_filter=["Empty"])} == {"empty"}

        desc = admin.describe_groups(["live", "empty"])
        assert desc["live"]["group_state"] == "Stable"
        assert desc["live"]["protocol_data"] == "range", desc["live"]
        assert [m["client_id"] for m in desc["live"]["members"]] == ["l0"]
        assert desc["empty"]["group_state"] == "Empty"
        assert desc["empty"]["members"] == []

        offsets = admin.list_group_offsets({"empty": None})["empty"]
        assert {(tp.topic, tp.partition): om.offset for tp, om in offsets.items()} == before

        # OffsetDelete: refused while a member subscribes to the topic, done for an empty group.
        tp0 = KpTopicPartition(*next(iter(before)))
        res = admin.delete_group_offsets("live", [tp0])
        assert res[tp0] is kp_errors.GroupSubscribedToTopicError, res
        assert committed_offsets(shoal.bootstrap, "live")[(tp0.topic, tp0.partition)] == TOTAL // PARTS
        res = admin.delete_group_offsets("empty", [tp0])
        assert res[tp0] is kp_errors.NoError, res
        assert committed_offsets(shoal.bootstrap, "empty") == {
            tp: o for tp, o in before.items() if tp != (tp0.topic, tp0.partition)}

        assert admin.delete_groups(["live", "empty"]) == {"live": "NonEmptyGroupError", "empty": "OK"}
        assert committed_offsets(shoal.bootstrap, "empty") == {}
        assert {g["group_id"] for g in admin.list_groups()} == {"live"}
    finally:
        admin.close()
