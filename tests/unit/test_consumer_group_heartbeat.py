"""ConsumerGroupHeartbeat: joining, reconciling, leaving, and every refusal (KIP-848, as Kafka 4)."""

from __future__ import annotations

import pytest

from shoal.coordinator.group.consumer import records as R
from shoal.coordinator.group.consumer.member import MemberState
from shoal.coordinator.group.records import key_version
from shoal.protocol.errors import ErrorCode as E
from tests.unit.consumer_group_harness import (
    TOPIC_IDS,
    CGHarness,
    Consumer,
    assert_exclusive,
    converge,
    replayed,
)

T = TOPIC_IDS["t"]


def test_join_writes_kafkas_records_in_order() -> None:
    h = CGHarness()
    h.cg_join("a")
    assert [key_version(k) for k, _ in h.records] == [
        R.MEMBER_METADATA, R.PARTITION_METADATA, R.GROUP_METADATA, R.TARGET_ASSIGNMENT_MEMBER,
        R.TARGET_ASSIGNMENT_METADATA, R.CURRENT_MEMBER_ASSIGNMENT]
    g = h.cgroup()
    assert (g.group_epoch, g.assignment_epoch, g.state_name) == (2, 2, "Stable")
    assert g.members["a"].client_host == "/127.0.0.1" and g.members["a"].rebalance_timeout_ms == 30000


def test_member_id_v0_generated_by_coordinator_v1_required() -> None:
    h = CGHarness()
    r = h.hb("", 0, topics=["t"], owned={}, rebalance=1000, version=0)
    assert r.error_code == 0 and r.member_id == "m1" and r.member_epoch == 2
    r = h.hb("", 0, topics=["t"], owned={}, rebalance=1000, version=1)
    assert r.error_code == E.INVALID_REQUEST and r.error_message == "MemberId can't be empty."


def test_plain_heartbeat_has_no_assignment_unless_it_changed() -> None:
    h = CGHarness()
    a = Consumer(h, "a")
    a.join()
    r = a.beat()
    assert r.error_code == 0 and r.member_epoch == 2 and r.assignment is None
    # A full request (all of rebalance timeout, topics and owned partitions) gets the assignment again.
    r = h.hb("a", 2, topics=["t"], owned={"t": {0, 1, 2, 3, 4, 5}}, rebalance=30000)
    assert r.assignment is not None and r.assignment.topic_partitions[0].partitions == [0, 1, 2, 3, 4, 5]


def test_second_member_partitions_are_revoked_before_reassigned() -> None:
    h = CGHarness()
    a, b = Consumer(h, "a"), Consumer(h, "b")
    a.join()
    rb = b.join()
    g = h.cgroup()
    assert g.group_epoch == 3 and g.assignment_epoch == 3
    # b's target partitions are still a's: b gets none yet (UNRELEASED_PARTITIONS), at the new epoch.
    assert rb.member_epoch == 3 and rb.assignment.topic_partitions == []
    assert g.members["b"].state == MemberState.UNRELEASED_PARTITIONS
    assert g.state_name == "Reconciling"
    # a must revoke first: it stays in epoch 2 with its kept partitions, and UNREVOKED_PARTITIONS.
    ra = h.hb("a", 2, owned={"t": {0, 1, 2, 3, 4, 5}})
    assert ra.member_epoch == 2 and ra.assignment.topic_partitions[0].partitions == [0, 2, 4]
    assert g.members["a"].state == MemberState.UNREVOKED_PARTITIONS
    assert g.members["a"].pending_revocation == {T: frozenset({1, 3, 5})}
    assert_exclusive(g)
    # Still owning them: nothing moves.
    assert h.hb("a", 2, owned={"t": {0, 1, 2, 3, 4, 5}}).assignment is None
    assert h.hb("b", 3, owned={}).assignment is None
    # a lets go: it moves to epoch 3; then b gets the released partitions.
    ra = h.hb("a", 2, owned={"t": {0, 2, 4}})
    assert ra.member_epoch == 3 and g.members["a"].state == MemberState.STABLE
    rb = h.hb("b", 3, owned={})
    assert rb.assignment.topic_partitions[0].partitions == [1, 3, 5]
    assert g.state_name == "Stable"
    assert_exclusive(g)


def test_three_members_each_partition_once() -> None:
    h = CGHarness()
    cs = [Consumer(h, m) for m in "abc"]
    for c in cs:
        c.join()
        converge(cs[: cs.index(c) + 1])
    owned = [c.partitions() for c in cs]
    assert sorted(p for ps in owned for p in ps) == list(range(6))
    assert [len(ps) for ps in owned] == [2, 2, 2]


def test_lost_response_previous_epoch_with_subset_is_accepted() -> None:
    h = CGHarness()
    a, b = Consumer(h, "a"), Consumer(h, "b")
    a.join()
    b.join()
    h.hb("a", 2, owned={"t": {0, 1, 2, 3, 4, 5}})
    h.hb("a", 2, owned={"t": {0, 2, 4}})  # epoch 3 now; pretend the answer was lost
    assert h.cgroup().members["a"].member_epoch == 3
    assert h.hb("a", 2, owned={"t": {0, 2}}).error_code == 0
    r = h.hb("a", 2, owned={"t": {0, 1}})  # owns one it should not: fenced
    assert r.error_code == E.FENCED_MEMBER_EPOCH


def test_fenced_member_epoch_and_unknown_member() -> None:
    h = CGHarness()
    Consumer(h, "a").join()
    before = list(h.records)
    assert h.hb("a", 5, owned={}).error_code == E.FENCED_MEMBER_EPOCH
    assert h.hb("zz", 1, owned={}).error_code == E.UNKNOWN_MEMBER_ID
    assert h.hb("a", 1, gid="nope").error_code == E.GROUP_ID_NOT_FOUND
    assert h.records == before  # refusals change nothing


@pytest.mark.parametrize("kw, message", [
    ({"gid": ""}, "GroupId can't be empty."),
    ({"instance": ""}, "InstanceId can't be empty."),
    ({"rack": ""}, "RackId can't be empty."),
    ({"rebalance": -1}, "RebalanceTimeoutMs must be provided in first request."),
    ({"owned": None}, "TopicPartitions must be empty when (re-)joining."),
    ({"owned": {"t": {1}}}, "TopicPartitions must be empty when (re-)joining."),
    ({"topics": None}, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."),
    ({"epoch": -3}, "MemberEpoch is invalid."),
])
def test_invalid_requests(kw: dict, message: str) -> None:
    h = CGHarness()
    args = {"topics": ["t"], "owned": {}, "rebalance": 1000, "epoch": 0} | kw
    epoch = args.pop("epoch")
    r = h.hb("a", epoch, **args)
    assert (r.error_code, r.error_message) == (E.INVALID_REQUEST, message)
    assert h.records == [] and "g" not in h.shard.groups


def test_static_leave_needs_instance_id_and_leave_needs_member_id() -> None:
    h = CGHarness()
    assert h.hb("a", -2).error_message == "InstanceId can't be null."
    assert h.hb("", -1, version=0).error_message == "MemberId can't be empty."


def test_unsupported_assignor() -> None:
    h = CGHarness()
    r = h.cg_join("a", assignor="sticky")
    assert r.error_code == E.UNSUPPORTED_ASSIGNOR and "Supported assignors: uniform, range" in r.error_message


def test_member_assignor_choice_and_default() -> None:
    h = CGHarness()
    h.cg_join("a")
    assert h.assignors["uniform"].calls == 1 and h.assignors["range"].calls == 0
    h.cg_join("b", assignor="range")
    assert h.assignors["range"].calls == 1
    assert h.describe_cg("g").groups[0].assignor_name == "range"


def test_group_max_size_reached() -> None:
    h = CGHarness(group_consumer_max_size=1)
    Consumer(h, "a").join()
    r = h.cg_join("b")
    assert r.error_code == E.GROUP_MAX_SIZE_REACHED
    assert set(h.cgroup().members) == {"a"}
    assert h.hb("a", 2, owned={"t": {0, 1, 2, 3, 4, 5}}).error_code == 0  # members still heartbeat


def test_leave_moves_partitions_and_writes_tombstones() -> None:
    h = CGHarness()
    a, b = Consumer(h, "a"), Consumer(h, "b")
    a.join()
    b.join()
    converge([a, b])
    n = len(h.records)
    r = a.leave()
    assert (r.error_code, r.member_id, r.member_epoch) == (0, "a", -1)
    assert [(key_version(k), v) for k, v in h.records[n:n + 3]] == [
        (R.CURRENT_MEMBER_ASSIGNMENT, None), (R.TARGET_ASSIGNMENT_MEMBER, None), (R.MEMBER_METADATA, None)]
    assert key_version(h.records[n + 3][0]) == R.GROUP_METADATA
    assert set(h.cgroup().members) == {"b"} and h.cgroup().group_epoch == 4
    converge([b])
    assert b.partitions() == set(range(6))
    assert a.leave().error_code == E.UNKNOWN_MEMBER_ID


def test_a_group_starts_at_epoch_one_and_its_epochs_meet_when_it_empties() -> None:
    """As Kafka 4.4: a new group is at epoch 1 (KAFKA-20268), so its first member gets epoch 2; when the
    last member leaves, the assignment epoch record follows the group epoch's (KAFKA-20442)."""
    h = CGHarness()
    a = Consumer(h, "a")
    assert a.join().member_epoch == 2
    converge([a])
    n = len(h.records)
    a.leave()
    assert [key_version(k) for k, _ in h.records[n:]][-2:] == [R.GROUP_METADATA, R.TARGET_ASSIGNMENT_METADATA]
    g = replayed(h).groups["g"]
    assert (g.group_epoch, g.assignment_epoch, g.state_name) == (3, 3, "Empty")


def test_subscription_change_bumps_epoch_and_unsubscribed_member_gets_nothing() -> None:
    h = CGHarness(topics={"t": 2, "u": 2})
    a, b = Consumer(h, "a", ["t"]), Consumer(h, "b", ["t"])
    a.join()
    b.join()
    converge([a, b])
    epoch = h.cgroup().group_epoch
    r = h.hb("b", b.epoch, topics=["u"], owned={T: b.partitions()})
    assert r.error_code == 0 and h.cgroup().group_epoch == epoch + 1
    b.epoch = r.member_epoch
    b._apply(r)
    converge([a, b])
    assert a.partitions("t") == {0, 1} and b.partitions("u") == {0, 1}


def test_topic_created_grown_and_deleted_later_reassign_at_next_heartbeat() -> None:
    h = CGHarness(topics={"t": 2})
    a = Consumer(h, "a", ["t", "u"])
    a.join()
    assert a.partitions("t") == {0, 1} and a.partitions("u") == set()
    h.set_topic("u", 3)  # created
    a.beat()
    assert h.cgroup().group_epoch == 3 and a.partitions("u") == {0, 1, 2}
    h.set_topic("t", 4)  # grown
    a.beat()
    assert h.cgroup().group_epoch == 4 and a.partitions("t") == {0, 1, 2, 3}
    h.topics.remove("u")  # deleted
    a.beat()
    converge([a])
    assert h.cgroup().group_epoch == 5 and a.partitions("u") == set()


def test_classic_group_with_members_is_not_a_consumer_group() -> None:
    h = CGHarness(group_consumer_migration_policy="disabled")  # no online upgrade
    h.stable_group(1)
    r = h.cg_join("a")
    assert (r.error_code, r.error_message) == (E.GROUP_ID_NOT_FOUND, "Group g is not a consumer group.")


def test_empty_classic_group_makes_way() -> None:
    h = CGHarness()
    h.commit({("t", 0): 5})  # a standalone commit: an Empty classic group
    assert h.group().type.value == "classic"
    assert h.cg_join("a").error_code == 0
    assert h.cgroup().state_name == "Stable"
    assert h.fetch({"t": [0]})[("t", 0)][0] == 5  # its offsets stay


def test_classic_join_to_consumer_group() -> None:
    h = CGHarness()
    a = Consumer(h, "a")
    a.join()
    # Whatever the migration policy, Kafka takes a classic JoinGroup into a consumer group with
    # members (a mixed group): a new member first gets its member id.
    assert h.resp(h.join()).error_code == E.MEMBER_ID_REQUIRED
    assert h.group().type.value == "consumer" and h.cgroup().state_name == "Stable"
    a.leave()
    assert h.resp(h.join()).error_code == E.MEMBER_ID_REQUIRED  # an Empty consumer group made way
    assert h.group().type.value == "classic"
    assert replayed(h).groups.get("g") is None  # its tombstones were written


def test_consumer_protocol_disabled_answers_unsupported_version() -> None:
    h = CGHarness(group_coordinator_rebalance_protocols=("classic",))
    assert h.cg_join("a").error_code == E.UNSUPPORTED_VERSION
    assert h.records == []


def test_fenced_member_rejoins_with_epoch_zero_and_the_same_member_id() -> None:
    h = CGHarness()
    a, b = Consumer(h, "a"), Consumer(h, "b")
    a.join()
    b.join()
    converge([a, b])
    assert h.hb("a", a.epoch + 3, owned={}).error_code == E.FENCED_MEMBER_EPOCH
    r = a.join()  # KIP-1082 clients keep their member id: a rejoin at epoch 0 is accepted
    assert r.error_code == 0 and r.member_id == "a" and r.assignment is not None
    converge([a, b])
    assert sorted(a.partitions() | b.partitions()) == list(range(6))


def test_empty_regex_with_names_is_no_regex() -> None:
    h = CGHarness()
    r = h.hb("a", 0, topics=["t"], owned={}, rebalance=1000, regex="")  # as librdkafka 2.16 joins
    assert r.error_code == 0 and h.cgroup().members["a"].subscribed_topic_regex is None
