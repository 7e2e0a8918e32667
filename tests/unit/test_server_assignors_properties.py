"""Properties of the server-side assignors over random groups: exact cover, subscriptions
respected, balance, stickiness and determinism. Kafka's worked examples are in
test_server_assignors.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from uuid import UUID

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shoal.assignors.server import GroupSpec, MemberSpec, RangeAssignor, TopicSpec, UniformAssignor

UNIFORM = UniformAssignor()
RANGE = RangeAssignor()
ASSIGNORS = [UNIFORM, RANGE]
UNKNOWN_TOPIC = UUID(int=0xDEAD)
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def groups(draw, homogeneous: bool | None = None, with_assigned: bool = True):
    """A random group: up to 5 topics (one may be unknown), up to 8 members, and a current
    assignment that may be stale (other topics, duplicates, partitions past a topic's end)."""
    topic_ids = draw(st.lists(st.uuids(), min_size=1, max_size=5, unique=True))
    topics = {t: TopicSpec(f"t{i}", draw(st.integers(0, 12))) for i, t in enumerate(topic_ids)}
    pool = [*topic_ids, UNKNOWN_TOPIC]
    member_ids = draw(st.lists(st.text("abcAB\u00e9", min_size=1, max_size=3), max_size=8, unique=True))
    if homogeneous is None:
        homogeneous = draw(st.booleans())
    shared = frozenset(draw(st.lists(st.sampled_from(pool), unique=True)))
    members = {}
    for member_id in member_ids:
        subscribed = shared if homogeneous else frozenset(draw(st.lists(st.sampled_from(pool), unique=True)))
        assigned = {}
        if with_assigned:
            for t in draw(st.lists(st.sampled_from(pool), unique=True, max_size=3)):
                assigned[t] = frozenset(draw(st.lists(st.integers(0, 14), max_size=6)))
        members[member_id] = MemberSpec(subscribed, assigned=assigned)
    return GroupSpec(members), topics


def owners(result):
    """(topic, partition) -> how many members were given it."""
    return Counter((t, p) for assignment in result.values() for t, ps in assignment.items() for p in ps)


def assert_exact_cover(group: GroupSpec, topics, result) -> None:
    assert set(result) == set(group.members)
    subscribed = {t for m in group.members.values() for t in m.subscribed_topic_ids if t in topics}
    expected = {(t, p) for t in subscribed for p in range(topics[t].num_partitions)}
    counted = owners(result)
    assert set(counted) == expected
    assert all(n == 1 for n in counted.values())
    for member_id, assignment in result.items():
        assert set(assignment) <= group.members[member_id].subscribed_topic_ids
        assert all(ps for ps in assignment.values())  # no empty entries


def with_assigned(group: GroupSpec, result) -> GroupSpec:
    return GroupSpec(
        {m: MemberSpec(s.subscribed_topic_ids, assigned=result[m]) for m, s in group.members.items()}
    )


def sizes(result) -> dict[str, int]:
    return {m: sum(len(ps) for ps in a.values()) for m, a in result.items()}


@SETTINGS
@given(groups())
def test_every_subscribed_partition_goes_to_exactly_one_subscriber(case):
    group, topics = case
    for assignor in ASSIGNORS:
        assert_exact_cover(group, topics, assignor.assign(group, topics))


@SETTINGS
@given(groups(homogeneous=True))
def test_uniform_homogeneous_is_balanced_within_one(case):
    group, topics = case
    counts = sizes(UNIFORM.assign(group, topics)).values()
    if counts:
        assert max(counts) - min(counts) <= 1


@SETTINGS
@given(groups())
def test_uniform_rerun_on_its_own_output_changes_nothing(case):
    group, topics = case
    first = UNIFORM.assign(group, topics)
    assert UNIFORM.assign(with_assigned(group, first), topics) == first


@SETTINGS
@given(groups(homogeneous=True), st.text("abcAB", min_size=4, max_size=4))
def test_uniform_homogeneous_join_moves_only_what_the_newcomer_takes(case, newcomer):
    group, topics = case
    before = UNIFORM.assign(group, topics)
    stable = with_assigned(group, before)
    subscription = next(iter(group.members.values())).subscribed_topic_ids if group.members else frozenset()
    joined = GroupSpec({**stable.members, newcomer: MemberSpec(subscription)})
    after = UNIFORM.assign(joined, topics)
    assert_exact_cover(joined, topics, after)
    for member_id, old in before.items():
        for t, ps in after[member_id].items():
            assert ps <= old.get(t, frozenset())  # old members only give up partitions
    total = sum(sizes(before).values())
    assert sizes(after)[newcomer] in {total // len(joined.members), -(-total // len(joined.members))}


@SETTINGS
@given(groups(homogeneous=True, with_assigned=False))
def test_range_is_contiguous_and_co_partitioned(case):
    group, topics = case
    result = RANGE.assign(group, topics)
    for assignment in result.values():
        for ps in assignment.values():
            assert max(ps) - min(ps) + 1 == len(ps)
    equal_counts = len({topics[t].num_partitions for a in result.values() for t in a}) <= 1
    if equal_counts:  # same subscriptions and partition counts: same numbers of every topic
        for assignment in result.values():
            assert len(set(assignment.values())) <= 1


@SETTINGS
@given(groups())
def test_output_does_not_depend_on_input_order(case):
    group, topics = case
    reordered = GroupSpec(
        {
            m: MemberSpec(s.subscribed_topic_ids, assigned=dict(reversed(list(s.assigned.items()))))
            for m, s in reversed(list(group.members.items()))
        }
    )
    topics_reordered = dict(reversed(list(topics.items())))
    for assignor in ASSIGNORS:
        assert assignor.assign(reordered, topics_reordered) == assignor.assign(group, topics)


def _big_group(num_members: int, num_topics: int, partitions_per_topic: int, heterogeneous: bool):
    topic_ids = [UUID(int=(i + 1) * 0x9E3779B97F4A7C15) for i in range(num_topics)]
    topics = {t: TopicSpec(f"t{i}", partitions_per_topic) for i, t in enumerate(topic_ids)}
    members = {}
    for i in range(num_members):
        subscribed = topic_ids[: 1 + i % num_topics] if heterogeneous else topic_ids
        members[f"member-{i:04d}"] = MemberSpec(frozenset(subscribed))
    return GroupSpec(members), topics


def test_determinism_across_hash_seeds():
    # Member ids are strings, whose hashes change with PYTHONHASHSEED: run in two processes.
    script = (
        "import json;"
        "from tests.unit.test_server_assignors_properties import _big_group, UNIFORM, RANGE;"
        "g, t = _big_group(40, 5, 7, True);"
        "print(json.dumps([{m: {str(k): sorted(v) for k, v in a.items()} for m, a in x.assign(g, t).items()}"
        " for x in (UNIFORM, RANGE)], sort_keys=True))"
    )
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        outputs.add(run.stdout)
    assert len(outputs) == 1
    assert json.loads(outputs.pop())  # not vacuous


def test_500_members_1000_partitions_is_fast():
    # The coordinator runs the assignor inline; Kafka's shape of the problem at this size.
    for heterogeneous in (False, True):
        group, topics = _big_group(500, 10, 100, heterogeneous)
        for assignor in ASSIGNORS:
            started = time.perf_counter()
            first = assignor.assign(group, topics)
            elapsed = time.perf_counter() - started
            assert_exact_cover(group, topics, first)
            assert elapsed < 0.5, (assignor.name, heterogeneous, elapsed)
