"""Property tests for every assignor: validity, balance, stickiness, cooperative two-phase revocation."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from shoal.assignors import (
    BroadcastAssignor,
    ClusterMetadata,
    RandomAssignor,
    Subscription,
    TopicPartition,
    lookup,
)

ALL = ["range", "roundrobin", "sticky", "cooperative-sticky"]
STICKY = ["sticky", "cooperative-sticky"]
settings.register_profile(
    "assignors", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("assignors")


@st.composite
def groups(draw, identical: bool | None = None):
    """(partitions_per_topic, subscriptions) with 1-6 members over up to 5 topics."""
    n_topics = draw(st.integers(1, 5))
    ppt = {f"t{i}": draw(st.integers(1, 9)) for i in range(n_topics)}
    n_members = draw(st.integers(1, 6))
    same = draw(st.booleans()) if identical is None else identical
    members = [f"m{i:02d}" for i in range(n_members)]
    if same:
        topics = sorted(draw(st.sets(st.sampled_from(sorted(ppt)), min_size=1)))
        subs = {m: Subscription(topics) for m in members}
    else:
        subs = {
            m: Subscription(sorted(draw(st.sets(st.sampled_from(sorted(ppt)), min_size=1)))) for m in members
        }
    return ppt, subs


def all_partitions(ppt, subs):
    topics = {t for s in subs.values() for t in s.topics if t in ppt}
    return {TopicPartition(t, p) for t in topics for p in range(ppt[t])}


def check_valid(ppt, subs, result, *, complete: bool = True):
    assert set(result) == set(subs), "every member must be in the result"
    owners = Counter(tp for ps in result.values() for tp in ps)
    assert all(c == 1 for c in owners.values()), "a partition went to two members"
    for m, ps in result.items():
        for tp in ps:
            assert tp.topic in subs[m].topics and 0 <= tp.partition < ppt[tp.topic]
    if complete:
        assert set(owners) == all_partitions(ppt, subs)


def counts(result):
    return {m: len(ps) for m, ps in result.items()}


def check_sticky_balance(subs, result):
    """Java's balance criterion: nobody holding a partition of topic t has 2+ more than a subscriber of t."""
    c = counts(result)
    for m, ps in result.items():
        for tp in ps:
            for other, s in subs.items():
                if tp.topic in s.topics:
                    assert c[m] <= c[other] + 1, (m, other, tp)


def resubscribe(subs, prev, gen, members=None):
    members = list(subs) if members is None else members
    return {
        m: Subscription(
            list(subs[m].topics),
            owned_partitions=list(prev.get(m, [])),
            generation_id=gen,
            rack_id=subs[m].rack_id,
        )
        for m in members
    }


def moved(before, after):
    """Partitions whose owner changed (ignoring partitions no longer assigned)."""
    owner = {tp: m for m, ps in before.items() for tp in ps}
    return {tp for m, ps in after.items() for tp in ps if owner.get(tp, m) != m}


@given(groups())
def test_every_assignor_valid(g):
    ppt, subs = g
    for name in ALL:
        check_valid(ppt, subs, lookup(name).assign(ppt, subs))
    check_valid(ppt, subs, RandomAssignor(seed=1).assign(ppt, subs))


@given(groups(identical=True))
def test_balance_with_identical_subscriptions(g):
    ppt, subs = g
    for name in ("roundrobin", "sticky", "cooperative-sticky"):
        c = counts(lookup(name).assign(ppt, subs)).values()
        assert max(c) - min(c) <= 1, name
    r = lookup("range").assign(ppt, subs)
    for t in subs[next(iter(subs))].topics:
        per_topic = [sum(tp.topic == t for tp in ps) for ps in r.values()]
        assert max(per_topic) - min(per_topic) <= 1


@given(groups(identical=False))
def test_sticky_balanced_with_unequal_subscriptions(g):
    ppt, subs = g
    for name in STICKY:
        check_sticky_balance(subs, lookup(name).assign(ppt, subs))


@given(groups(), st.sampled_from(STICKY))
def test_sticky_moves_nothing_when_nothing_changed(g, name):
    ppt, subs = g
    a = lookup(name)
    first = a.assign(ppt, subs)
    again = a.assign(ppt, resubscribe(subs, first, 1))
    assert {m: set(v) for m, v in again.items()} == {m: set(v) for m, v in first.items()}


@given(groups(identical=True), st.sampled_from(STICKY), st.data())
def test_member_leaving_moves_only_its_partitions(g, name, data):
    ppt, subs = g
    assume(len(subs) >= 2)
    a = lookup(name)
    first = a.assign(ppt, subs)
    leaver = data.draw(st.sampled_from(sorted(subs)))
    rest = [m for m in subs if m != leaver]
    second = a.assign(ppt, resubscribe(subs, first, 1, rest))
    check_valid(ppt, {m: subs[m] for m in rest}, second)
    for m in rest:
        assert set(first[m]) <= set(second[m]), "a surviving member lost a partition"
    assert moved(first, second) == set(first[leaver])
    c = counts(second).values()
    assert max(c) - min(c) <= 1


@given(groups(identical=False), st.sampled_from(STICKY), st.data())
def test_member_leaving_unequal_still_valid_and_balanced(g, name, data):
    ppt, subs = g
    assume(len(subs) >= 2)
    a = lookup(name)
    first = a.assign(ppt, subs)
    leaver = data.draw(st.sampled_from(sorted(subs)))
    rest = {m: subs[m] for m in subs if m != leaver}
    second = a.assign(ppt, resubscribe(subs, first, 1, list(rest)))
    if name == "cooperative-sticky":
        # Balancing may have revoked partitions; the follow-up rebalance hands them out.
        check_valid(ppt, rest, second, complete=False)
        assert moved(first, second) <= set(first[leaver])
        second = a.assign(ppt, resubscribe(rest, second, 2))
    check_valid(ppt, rest, second)
    check_sticky_balance(rest, second)


def _min_moves_on_join(ppt, subs, first, n_after):
    """Fewest partitions that must change owner to rebalance after one member joins."""
    total = sum(ppt[t] for t in subs[next(iter(subs))].topics)
    min_q, extra = divmod(total, n_after)
    held = sorted((len(v) for v in first.values()), reverse=True)
    keep = sum(min(h, min_q) for h in held) + min(extra, sum(1 for h in held if h > min_q))
    return total - keep


@given(groups(identical=True))
def test_eager_sticky_join_moves_the_minimum(g):
    ppt, subs = g
    a = lookup("sticky")
    first = a.assign(ppt, subs)
    topics = list(subs[next(iter(subs))].topics)
    joined = dict(resubscribe(subs, first, 1), zz=Subscription(topics))
    second = a.assign(ppt, joined)
    check_valid(ppt, joined, second)
    c = counts(second).values()
    assert max(c) - min(c) <= 1
    assert len(moved(first, second)) == _min_moves_on_join(ppt, subs, first, len(joined))


@given(groups(identical=True))
def test_cooperative_join_two_phases_move_the_minimum(g):
    ppt, subs = g
    a = lookup("cooperative-sticky")
    first = a.assign(ppt, subs)
    topics = list(subs[next(iter(subs))].topics)
    joined = dict(resubscribe(subs, first, 1), zz=Subscription(topics))
    r1 = a.assign(ppt, joined)
    check_valid(ppt, joined, r1, complete=False)
    # Phase 1: only revocations; nothing changes hands.
    assert moved(first, r1) == set()
    for m in subs:
        assert set(r1[m]) <= set(first[m])
    revoked = {tp for m in subs for tp in set(first[m]) - set(r1[m])}
    # Phase 2 (follow-up rebalance): owners no longer claim the revoked partitions.
    r2 = a.assign(ppt, resubscribe(joined, r1, 2))
    check_valid(ppt, joined, r2)
    c = counts(r2).values()
    assert max(c) - min(c) <= 1
    assert moved(r1, r2) == set()
    assert len(revoked) == _min_moves_on_join(ppt, subs, first, len(joined))
    assert set(r2["zz"]) >= revoked - {tp for m in subs for tp in r2[m]}


@st.composite
def prior_ownership(draw, identical: bool | None = None):
    """A group plus arbitrary (possibly unbalanced, overlapping, stale) previous ownership."""
    ppt, subs = draw(groups(identical))
    parts = sorted(TopicPartition(t, p) for t, n in ppt.items() for p in range(n))
    out = {}
    for m, s in subs.items():
        owned = draw(st.lists(st.sampled_from(parts), max_size=len(parts), unique=True))
        out[m] = Subscription(
            s.topics, owned_partitions=owned, generation_id=draw(st.sampled_from([3, 3, 3, 2]))
        )
    return ppt, out


@given(prior_ownership())
def test_cooperative_never_hands_over_in_the_same_round(g):
    ppt, subs = g
    r = lookup("cooperative-sticky").assign(ppt, subs)
    check_valid(ppt, subs, r, complete=False)
    max_gen = max(s.generation_id for s in subs.values())
    claimants: dict[TopicPartition, set[str]] = {}
    for m, s in subs.items():
        if s.generation_id == max_gen:
            for tp in s.owned_partitions:
                claimants.setdefault(tp, set()).add(m)
    for m, ps in r.items():
        for tp in ps:
            assert claimants.get(tp, {m}) == {m}, f"{tp} given to {m} while owned by {claimants[tp]}"
    # Whatever is left unassigned is exactly what a current owner is revoking.
    unassigned = all_partitions(ppt, subs) - {tp for ps in r.values() for tp in ps}
    for tp in unassigned:
        assert tp in claimants


@given(prior_ownership())
def test_eager_sticky_valid_and_balanced_from_any_prior_state(g):
    ppt, subs = g
    r = lookup("sticky").assign(ppt, subs)
    check_valid(ppt, subs, r)
    check_sticky_balance(subs, r)


@given(groups())
def test_broadcast_gives_each_subscriber_everything(g):
    ppt, subs = g
    r = BroadcastAssignor().assign(ppt, subs)
    for m, s in subs.items():
        assert set(r[m]) == {TopicPartition(t, p) for t in s.topics for p in range(ppt[t])}


@st.composite
def rack_groups(draw):
    ppt, subs = draw(groups())
    racks = ["a", "b", "c"]
    cluster = ClusterMetadata(
        ppt,
        {
            t: [frozenset(draw(st.sets(st.sampled_from(racks), max_size=2))) for _ in range(n)]
            for t, n in ppt.items()
        },
    )
    subs = {
        m: Subscription(s.topics, rack_id=draw(st.sampled_from([None, "a", "b", "c"])))
        for m, s in subs.items()
    }
    return cluster, subs


@given(rack_groups())
def test_rack_aware_assignors_stay_valid_and_balanced(g):
    cluster, subs = g
    ppt = dict(cluster.partitions_per_topic)
    plain = {m: Subscription(s.topics) for m, s in subs.items()}
    for name in ("range", "sticky", "cooperative-sticky"):
        r = {m: a.partitions for m, a in lookup(name).assign_cluster(cluster, subs).items()}
        check_valid(ppt, subs, r)
        base = lookup(name).assign(ppt, plain)
        # Racks never cost balance: the count profile matches the rack-blind one.
        if name == "range":
            for t in ppt:
                assert sorted(sum(tp.topic == t for tp in ps) for ps in r.values()) == sorted(
                    sum(tp.topic == t for tp in ps) for ps in base.values()
                )
        elif len({frozenset(s.topics) for s in subs.values()}) == 1:
            assert sorted(counts(r).values()) == sorted(counts(base).values())
        else:
            check_sticky_balance(subs, r)


@given(rack_groups())
def test_rack_aware_sticky_is_sticky(g):
    cluster, subs = g
    for name in STICKY:
        a = lookup(name)
        first = {m: x.partitions for m, x in a.assign_cluster(cluster, subs).items()}
        again = {m: x.partitions for m, x in a.assign_cluster(cluster, resubscribe(subs, first, 4)).items()}
        assert {m: set(v) for m, v in again.items()} == {m: set(v) for m, v in first.items()}
