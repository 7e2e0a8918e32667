"""The share groups' `simple` assignor (Kafka's SimpleAssignor) as a pure function."""

from __future__ import annotations

import uuid
from collections import Counter

from shoal.assignors.server.spec import GroupSpec, MemberSpec, TopicSpec
from shoal.assignors.share_simple import SimpleAssignor, desired_counts

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)
TOPICS = {T1: TopicSpec("t1", 2), T2: TopicSpec("t2", 3)}


def spec(subs: dict[str, set[uuid.UUID]], assigned: dict[str, dict[uuid.UUID, set[int]]] | None = None) -> GroupSpec:
    assigned = assigned or {}
    return GroupSpec(members={m: MemberSpec(subscribed_topic_ids=frozenset(t),
                                            assigned={k: frozenset(v) for k, v in assigned.get(m, {}).items()})
                              for m, t in subs.items()})


def holders(result: dict, topic: uuid.UUID) -> Counter:
    return Counter(p for a in result.values() for p in a.get(topic, ()))


def test_desired_counts() -> None:
    assert desired_counts(3, 2) == (2, [2, 1, 1])
    assert desired_counts(2, 5) == (1, [3, 2])
    assert desired_counts(4, 4) == (1, [1, 1, 1, 1])
    assert desired_counts(5, 2) == (3, [2, 1, 1, 1, 1])
    assert desired_counts(0, 3) == (0, [])
    assert desired_counts(2, 0) == (0, [0, 0])


def test_fewer_members_than_partitions_each_partition_once() -> None:
    result = SimpleAssignor().assign(spec({"a": {T2}, "b": {T2}}), TOPICS)
    assert holders(result, T2) == Counter({0: 1, 1: 1, 2: 1})
    assert sorted(len(r[T2]) for r in result.values()) == [1, 2]


def test_more_members_than_partitions_share_partitions() -> None:
    result = SimpleAssignor().assign(spec({"a": {T1}, "b": {T1}, "c": {T1}}), TOPICS)
    assert holders(result, T1) == Counter({0: 2, 1: 2})  # sharing = ceil(3 / 2) = 2
    assert sorted(len(r.get(T1, ())) for r in result.values()) == [1, 1, 2]
    assert all(r.get(T1) for r in result.values())  # every member gets work


def test_every_member_even_one_partition() -> None:
    result = SimpleAssignor().assign(spec({m: {T1} for m in "abcde"}), {T1: TopicSpec("t1", 1)})
    assert all(r == {T1: frozenset({0})} for r in result.values())


def test_sticky_when_a_member_joins() -> None:
    before = SimpleAssignor().assign(spec({"a": {T2}, "b": {T2}}), TOPICS)
    after = SimpleAssignor().assign(spec({"a": {T2}, "b": {T2}, "c": {T2}},
                                         {m: {t: set(p) for t, p in a.items()} for m, a in before.items()}), TOPICS)
    assert holders(after, T2) == Counter({0: 1, 1: 1, 2: 1})
    for m in ("a", "b"):
        assert after[m][T2] <= before[m][T2]  # nobody gets a partition it gave up to the newcomer
    assert len(after["c"][T2]) == 1


def test_unsubscribed_topics_dropped() -> None:
    result = SimpleAssignor().assign(spec({"a": {T1}}, {"a": {T2: {0, 1}}}), TOPICS)
    assert result == {"a": {T1: frozenset({0, 1})}}


def test_heterogeneous_balances_topic_by_topic() -> None:
    result = SimpleAssignor().assign(spec({"a": {T1}, "b": {T2}, "c": {T1, T2}}), TOPICS)
    assert set(result["a"]) == {T1} and set(result["b"]) == {T2}
    assert holders(result, T1) == Counter({0: 1, 1: 1})
    assert holders(result, T2) == Counter({0: 1, 1: 1, 2: 1})
    assert len(result["c"][T1]) == 1 and len(result["c"][T2]) in (1, 2)


def test_unknown_topic_and_no_members() -> None:
    assert SimpleAssignor().assign(spec({"a": {uuid.UUID(int=9)}}), TOPICS) == {"a": {}}
    assert SimpleAssignor().assign(spec({}), TOPICS) == {}
