"""The consumer group type with the real server-side assignors (`uniform`, `range`) when the
registry has them: every partition owned once, balanced, replayable."""

from __future__ import annotations

import pytest

from tests.unit.consumer_group_harness import (
    CGHarness,
    Consumer,
    converge,
    real_assignors,
    replayed,
    snapshot,
)

ASSIGNORS = real_assignors()
pytestmark = pytest.mark.skipif(set(ASSIGNORS) != {"uniform", "range"}, reason="server assignors not registered")


@pytest.mark.parametrize("name", ["uniform", "range"])
def test_members_join_and_leave_with_a_real_assignor(name: str) -> None:
    h = CGHarness(topics={"t": 6, "u": 3}, assignors=ASSIGNORS)
    cs = [Consumer(h, m, ["t", "u"]) for m in "abc"]
    for i, c in enumerate(cs):
        r = h.cg_join(c.member_id, c.topics, assignor=name)
        c._apply(r)
        converge(cs[: i + 1])
    owned = [(c.partitions("t"), c.partitions("u")) for c in cs]
    assert sorted(p for t, _ in owned for p in t) == list(range(6))
    assert sorted(p for _, u in owned for p in u) == list(range(3))
    assert all(len(t) + len(u) == 3 for t, u in owned)
    assert h.describe_cg("g").groups[0].assignor_name == name
    cs[0].leave()
    converge(cs[1:])
    assert sorted(p for c in cs[1:] for p in c.partitions("t")) == list(range(6))
    assert snapshot(replayed(h)) == snapshot(h.shard)


def test_default_is_the_first_configured() -> None:
    h = CGHarness(assignors=ASSIGNORS)
    Consumer(h, "a").join()
    assert h.describe_cg("g").groups[0].assignor_name == "uniform"
    h = CGHarness(assignors=ASSIGNORS, group_consumer_assignors=("range", "uniform"))
    Consumer(h, "a").join()
    assert h.describe_cg("g").groups[0].assignor_name == "range"
