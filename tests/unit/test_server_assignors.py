"""Kafka's worked examples for the server-side assignors (KIP-848), re-expressed.

Each example names the test in Kafka 4.0's group-coordinator it comes from
(OptimizedUniformAssignmentBuilderTest, UniformHeterogeneousAssignmentBuilderTest,
RangeAssignorTest); the expected assignments are Kafka's. Kafka's tests use the fixed topic
ids below, and the homogeneous uniform builder's choices depend on them (it lists topics in
Java HashSet order), so the same ids are used here. Property tests live in
test_server_assignors_properties.py.
"""

from __future__ import annotations

import base64
from uuid import UUID

import pytest

from shoal.assignors.server import (
    SERVER_ASSIGNORS,
    GroupSpec,
    MemberSpec,
    RangeAssignor,
    TopicSpec,
    UniformAssignor,
    UnknownServerAssignorError,
    lookup,
)
from shoal.assignors.server._order import java_hash_set_order, java_string_key, uuid_key


def kafka_uuid(text: str) -> UUID:
    """Kafka's Uuid.fromString: 22 characters of unpadded URL-safe base64."""
    return UUID(bytes=base64.urlsafe_b64decode(text + "=="))


T1 = kafka_uuid("T1-A4s3VTwiI5CTbEp6POw")
T2 = kafka_uuid("T2-B4s3VTwiI5YHbPp6YUe")
T3 = kafka_uuid("T3-CU8fVTLCz5YMkLoDQsa")
T4 = kafka_uuid("T4-Tw9fVTLCz5HbPp6YQsa")
UNIFORM = UniformAssignor()
RANGE = RangeAssignor()


def topics(**counts: int) -> dict[UUID, TopicSpec]:
    ids = {"t1": T1, "t2": T2, "t3": T3, "t4": T4}
    return {ids[name]: TopicSpec(name, n) for name, n in counts.items()}


def member(*subscribed: UUID, instance: str | None = None, **assigned: tuple[int, ...]) -> MemberSpec:
    ids = {"t1": T1, "t2": T2, "t3": T3, "t4": T4}
    return MemberSpec(
        frozenset(subscribed),
        instance_id=instance,
        assigned={ids[name]: frozenset(ps) for name, ps in assigned.items()},
    )


def a(**parts: tuple[int, ...]) -> dict[UUID, frozenset[int]]:
    ids = {"t1": T1, "t2": T2, "t3": T3, "t4": T4}
    return {ids[name]: frozenset(ps) for name, ps in parts.items()}


def run(assignor, topic_specs, **members: MemberSpec):
    return assignor.assign(GroupSpec(members), topic_specs)


# --- registry -------------------------------------------------------------------------------


def test_registry_names_kafkas_two_assignors_uniform_first():
    assert list(SERVER_ASSIGNORS) == ["uniform", "range"]
    assert lookup("uniform") is SERVER_ASSIGNORS["uniform"]
    assert lookup("range").name == "range"


def test_lookup_of_an_unknown_name_says_which_exist():
    with pytest.raises(UnknownServerAssignorError, match=r"'cooperative-sticky'.*range, uniform"):
        lookup("cooperative-sticky")
    with pytest.raises(KeyError):  # still a KeyError, for callers that catch that
        lookup("")


# --- the Java orders ------------------------------------------------------------------------


def test_java_hash_set_order_of_kafkas_test_topic_ids():
    # Kafka's expected assignments imply T2 and T3 iterate before T1; their Uuid hash codes
    # fall in buckets 1, 9 and 10 of a 16-bucket table.
    assert java_hash_set_order([T1, T2, T3]) == [T2, T3, T1]


def test_uuid_order_is_signed_like_java_long():
    low = UUID(int=1 << 127)  # the top bit set: a negative Java long, so it sorts first
    high = UUID(int=1)
    assert sorted([high, low], key=uuid_key) == [low, high]


def test_java_string_order_is_utf16_code_units():
    # U+FF21 is above the surrogates in UTF-16 code units but below U+1F600 in code points.
    assert sorted(["\U0001f600", "\uff21"], key=java_string_key) == ["\U0001f600", "\uff21"]


# --- uniform, homogeneous (OptimizedUniformAssignmentBuilderTest) ------------------------------


def test_uniform_one_member_no_subscription():
    # testOneMemberNoTopicSubscription (Kafka returns no entry; shoal returns {} per member).
    assert run(UNIFORM, topics(t1=3), A=member()) == {"A": {}}


def test_uniform_subscription_to_unknown_topic_is_ignored():
    # testOneMemberSubscribedToNonexistentTopic: Kafka's assignor throws, but its coordinator
    # never passes topics missing from the metadata image; shoal ignores them instead.
    assert run(UNIFORM, topics(t1=3), A=member(T2)) == {"A": {}}
    assert run(UNIFORM, topics(t1=3), A=member(T1, T2)) == {"A": a(t1=(0, 1, 2))}


def test_uniform_first_assignment_two_members_two_topics():
    # testFirstAssignmentTwoMembersTwoTopicsNoMemberRacks: 5 partitions, A's quota is 3; the
    # list of partitions starts with T3 (Java HashSet order), so A gets all of T3.
    got = run(UNIFORM, topics(t1=3, t3=2), A=member(T1, T3), B=member(T1, T3))
    assert got == {"A": a(t1=(0,), t3=(0, 1)), "B": a(t1=(1, 2))}


def test_uniform_more_members_than_partitions():
    # testFirstAssignmentNumMembersGreaterThanTotalNumPartitions
    got = run(UNIFORM, topics(t3=2), A=member(T3), B=member(T3), C=member(T3))
    assert got == {"A": a(t3=(0,)), "B": a(t3=(1,)), "C": {}}


def test_uniform_reassignment_given_unbalanced_previous_assignment():
    # testReassignmentForTwoMembersTwoTopicsGivenUnbalancedPrevAssignment: A holds 4 of 6 and
    # gives up its last partition in (topic id, partition) order, T2-1.
    got = run(
        UNIFORM,
        topics(t1=3, t2=3),
        A=member(T1, T2, t1=(0, 1), t2=(0, 1)),
        B=member(T1, T2, t1=(2,), t2=(2,)),
    )
    assert got == {"A": a(t1=(0, 1), t2=(0,)), "B": a(t1=(2,), t2=(1, 2))}


def test_uniform_reassignment_when_partitions_are_added():
    # testReassignmentWhenPartitionsAreAddedForTwoMembersTwoTopics
    got = run(
        UNIFORM,
        topics(t1=6, t2=5),
        A=member(T1, T2, t1=(0, 2), t2=(0,)),
        B=member(T1, T2, t1=(1,), t2=(1, 2)),
    )
    assert got == {"A": a(t1=(0, 2, 3), t2=(0, 3, 4)), "B": a(t1=(1, 4, 5), t2=(1, 2))}


def test_uniform_reassignment_when_a_member_joins():
    # testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics
    got = run(
        UNIFORM,
        topics(t1=3, t2=3),
        A=member(T1, T2, t1=(0, 2), t2=(0,)),
        B=member(T1, T2, t1=(1,), t2=(1, 2)),
        C=member(T1, T2),
    )
    assert got == {"A": a(t1=(0, 2)), "B": a(t1=(1,), t2=(1,)), "C": a(t2=(0, 2))}


def test_uniform_reassignment_when_a_member_leaves():
    # testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersTwoTopics
    got = run(
        UNIFORM,
        topics(t1=3, t2=3),
        A=member(T1, T2, t1=(0,), t2=(0,)),
        B=member(T1, T2, t1=(1,), t2=(1,)),
    )
    assert got == {"A": a(t1=(0,), t2=(0, 2)), "B": a(t1=(1, 2), t2=(1,))}


def test_uniform_reassignment_when_a_subscription_is_dropped():
    # testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics
    got = run(
        UNIFORM,
        topics(t1=2, t2=2),
        A=member(T2, t1=(0,), t2=(0,)),
        B=member(T2, t1=(1,), t2=(1,)),
    )
    assert got == {"A": a(t2=(0,)), "B": a(t2=(1,))}


# --- uniform, heterogeneous (UniformHeterogeneousAssignmentBuilderTest) --------------------------


def test_uniform_heterogeneous_no_subscriptions():
    # testTwoMembersNoTopicSubscription
    assert run(UNIFORM, topics(t1=3), A=member(), B=member()) == {"A": {}, "B": {}}


def test_uniform_heterogeneous_first_assignment():
    # testFirstAssignmentTwoMembersTwoTopics: T3 (6 partitions, 2 subscribers) goes first.
    got = run(UNIFORM, topics(t1=3, t3=6), A=member(T1, T3), B=member(T3))
    assert got == {"A": a(t1=(0, 1, 2), t3=(4,)), "B": a(t3=(0, 1, 2, 3, 5))}


def test_uniform_heterogeneous_more_members_than_partitions():
    # testFirstAssignmentNumMembersGreaterThanTotalNumPartitions
    got = run(UNIFORM, topics(t3=1, t1=2), A=member(T3), B=member(T3), C=member(T1))
    assert got == {"A": a(t3=(0,)), "B": {}, "C": a(t1=(0, 1))}


def test_uniform_heterogeneous_unbalanced_previous_assignment():
    # testReassignmentForTwoMembersThreeTopicsGivenUnbalancedPrevAssignment
    got = run(
        UNIFORM,
        topics(t1=6, t2=4, t3=4),
        A=member(T1, t1=(0, 1, 2)),
        B=member(T1, T2, t1=(3,), t2=(0,)),
        C=member(T1, T2, T3, t1=(4, 5), t2=(1, 2, 3), t3=(0, 1, 2, 3)),
    )
    assert got == {
        "A": a(t1=(0, 1, 2, 5)),
        "B": a(t1=(3,), t2=(0, 1, 2, 3)),
        "C": a(t1=(4,), t3=(0, 1, 2, 3)),
    }


def test_uniform_heterogeneous_partitions_added():
    # testReassignmentWhenPartitionsAreAddedForTwoMembers
    got = run(
        UNIFORM,
        topics(t1=6, t2=5, t3=3, t4=3),
        A=member(T1, T3, t1=(0, 1, 2, 3), t3=(0, 1)),
        B=member(T1, T2, T3, T4, t2=(0, 1, 2), t4=(0, 1, 2)),
    )
    assert got == {
        "A": a(t1=(0, 1, 2, 3, 4, 5), t3=(0, 1, 2)),
        "B": a(t2=(0, 1, 2, 3, 4), t4=(0, 1, 2)),
    }


def test_uniform_heterogeneous_member_and_partitions_added():
    # testReassignmentWhenOneMemberAddedAndPartitionsAddedTwoMembersTwoTopics: A no longer
    # subscribes to T2 and loses T2-0.
    got = run(
        UNIFORM,
        topics(t1=6, t2=7),
        A=member(T1, t1=(0, 2), t2=(0,)),
        B=member(T1, T2, t1=(1,), t2=(1, 2)),
        C=member(T1, T2),
    )
    assert got == {
        "A": a(t1=(0, 2, 3, 4, 5)),
        "B": a(t1=(1,), t2=(1, 2, 6)),
        "C": a(t2=(0, 3, 4, 5)),
    }


def test_uniform_heterogeneous_member_removed():
    # testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithThreeMembersThreeTopics
    got = run(
        UNIFORM,
        topics(t1=3, t2=8, t3=3),
        A=member(T1, T3, t1=(0, 1, 2), t3=(0, 1)),
        B=member(T2, t2=(3, 4, 5, 6)),
    )
    assert got == {"A": a(t1=(0, 1, 2), t3=(0, 1, 2)), "B": a(t2=tuple(range(8)))}


def test_uniform_heterogeneous_subscription_removed():
    # testReassignmentWhenOneSubscriptionRemovedAfterInitialAssignmentWithTwoMembersTwoTopics
    got = run(
        UNIFORM,
        topics(t1=3, t2=5),
        A=member(T1, t1=(0, 2), t2=(1, 3)),
        B=member(T1, T2, t1=(1,), t2=(0, 2, 4)),
    )
    assert got == {"A": a(t1=(0, 1, 2)), "B": a(t2=(0, 1, 2, 3, 4))}


def test_uniform_heterogeneous_partitions_run_out_before_balance():
    # testReassignmentWhenTopicPartitionsRunOutAndMembersHaveNoPartitions. Both subscribe to
    # the same topics, so Kafka only reaches the heterogeneous builder because the test says so;
    # an unknown fourth topic in A's subscription makes the group heterogeneous here.
    got = run(
        UNIFORM,
        topics(t1=2, t2=2, t3=2),
        A=member(T1, T2, T3, T4, t1=(0, 1), t2=(0, 1), t3=(0, 1)),
        B=member(T1, T2, T3),
    )
    assert got == {"A": a(t2=(0,), t3=(0, 1)), "B": a(t1=(0, 1), t2=(1,))}


def test_uniform_heterogeneous_member_without_subscription():
    # testFirstAssignmentWithTwoMembersIncludingOneWithoutSubscriptions
    got = run(UNIFORM, topics(t1=3), A=member(T1), B=member())
    assert got == {"A": a(t1=(0, 1, 2)), "B": {}}


# --- range (RangeAssignorTest) -----------------------------------------------------------------


def test_range_one_member_no_topic_and_unknown_topic():
    # testOneMemberNoTopic, testOneMemberSubscribedToNonExistentTopic (ignored, not an error)
    assert run(RANGE, topics(t1=3), A=member()) == {"A": {}}
    assert run(RANGE, topics(t1=3), A=member(T2)) == {"A": {}}


def test_range_same_subscriptions_are_co_partitioned():
    # testFirstAssignmentTwoMembersTwoTopicsSameSubscriptions
    got = run(RANGE, topics(t1=3, t3=2), A=member(T1, T3), B=member(T1, T3))
    assert got == {"A": a(t1=(0, 1), t3=(0,)), "B": a(t1=(2,), t3=(1,))}


def test_range_different_subscriptions():
    # testFirstAssignmentThreeMembersThreeTopicsDifferentSubscriptions
    got = run(RANGE, topics(t1=3, t2=3, t3=2), A=member(T1, T2), B=member(T3), C=member(T2, T3))
    assert got == {"A": a(t1=(0, 1, 2), t2=(0, 1)), "B": a(t3=(0,)), "C": a(t2=(2,), t3=(1,))}


def test_range_more_members_than_partitions():
    # testFirstAssignmentNumMembersGreaterThanNumPartitions
    got = run(RANGE, topics(t1=3, t3=2), A=member(T1, T3), B=member(T1, T3), C=member(T1, T3))
    assert got == {"A": a(t1=(0,), t3=(0,)), "B": a(t1=(1,), t3=(1,)), "C": a(t1=(2,))}


def test_range_static_member_rejoining_keeps_its_ranges():
    # testStaticMembership: A rejoins as "memberA1" with the same instance id.
    before = run(RANGE, topics(t1=3), A=member(T1, instance="instanceA"), B=member(T1, instance="instanceB"))
    after = run(
        RANGE, topics(t1=3), B=member(T1, instance="instanceB"), memberA1=member(T1, instance="instanceA")
    )
    assert after == {"memberA1": before["A"], "B": before["B"]}
    assert before == {"A": a(t1=(0, 1)), "B": a(t1=(2,))}


def test_range_static_members_sort_before_dynamic_ones():
    # testMixedStaticMembership: C is static and B is not, so C comes before B.
    before = run(
        RANGE,
        topics(t1=5),
        A=member(T1, instance="instanceA"),
        C=member(T1, instance="instanceC"),
        B=member(T1),
    )
    assert before == {"A": a(t1=(0, 1)), "C": a(t1=(2, 3)), "B": a(t1=(4,))}
    after = run(
        RANGE,
        topics(t1=5),
        C=member(T1, instance="instanceC"),
        B=member(T1),
        memberA1=member(T1, instance="instanceA"),
    )
    assert after == {"memberA1": before["A"], "B": before["B"], "C": before["C"]}


def test_range_ignores_the_current_assignment():
    # testReassignmentNumMembersGreaterThanNumPartitionsWhenOneMemberAdded,
    # testReassignmentWhenOnePartitionAddedForTwoMembersTwoTopics,
    # testReassignmentWhenOneMemberAddedAfterInitialAssignmentWithTwoMembersTwoTopics.
    got = run(
        RANGE,
        topics(t1=2, t2=2),
        A=member(T1, T2, t1=(0,), t2=(0,)),
        B=member(T1, T2, t1=(1,), t2=(1,)),
        C=member(T1, T2),
    )
    assert got == {"A": a(t1=(0,), t2=(0,)), "B": a(t1=(1,), t2=(1,)), "C": {}}
    got = run(
        RANGE,
        topics(t1=4, t2=4),
        A=member(T1, T2, t1=(0, 1), t2=(0, 1)),
        B=member(T1, T2, t1=(2,), t2=(2,)),
    )
    assert got == {"A": a(t1=(0, 1), t2=(0, 1)), "B": a(t1=(2, 3), t2=(2, 3))}
    got = run(
        RANGE,
        topics(t1=3, t2=3),
        A=member(T1, T2, t1=(0, 1), t2=(0, 1)),
        B=member(T1, T2, t1=(2,), t2=(2,)),
        C=member(T1, T2),
    )
    assert got == {"A": a(t1=(0,), t2=(0,)), "B": a(t1=(1,), t2=(1,)), "C": a(t1=(2,), t2=(2,))}


def test_range_member_and_partition_added_with_different_subscriptions():
    # testReassignmentWhenOneMemberAddedAndOnePartitionAfterInitialAssignmentWithTwoMembersTwoTopics
    got = run(
        RANGE,
        topics(t1=4, t2=3),
        A=member(T1, T2, t1=(0, 1), t2=(0, 1)),
        B=member(T1, T2, t1=(2,), t2=(2,)),
        C=member(T1),
    )
    assert got == {"A": a(t1=(0, 1), t2=(0, 1)), "B": a(t1=(2,), t2=(2,)), "C": a(t1=(3,))}


def test_range_member_removed_and_subscriptions_changed():
    # testReassignmentWhenOneMemberRemovedAfterInitialAssignmentWithTwoMembersTwoTopics,
    # testReassignmentWhenMultipleSubscriptionsRemovedAfterInitialAssignmentWithThreeMembersTwoTopics
    got = run(RANGE, topics(t1=3, t2=3), B=member(T1, T2, t1=(2,), t2=(2,)))
    assert got == {"B": a(t1=(0, 1, 2), t2=(0, 1, 2))}
    got = run(
        RANGE,
        topics(t1=3, t2=3, t3=2),
        A=member(T1, t1=(0, 1, 2), t2=(0,)),
        B=member(T1, T2, T3, t2=(1,)),
        C=member(T2, t2=(2,), t3=(0, 1)),
    )
    assert got == {"A": a(t1=(0, 1)), "B": a(t1=(2,), t2=(0, 1), t3=(0, 1)), "C": a(t2=(2,))}
