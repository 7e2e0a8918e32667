"""Client quotas, the pure part: Kafka's validation and messages, describe filters, the precedence
of quota entities, the sampled rate and the throttle time formula (with a fake clock)."""

from __future__ import annotations

import pytest

from shoal.broker.quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEnforcer,
    QuotaFilterError,
    QuotaStore,
    Rate,
    entity_of,
    entity_str,
    quota_user,
)
from shoal.protocol.errors import ErrorCode

U, C = "user", "client-id"


def store_with(*entries: tuple[list, list]) -> QuotaStore:
    store = QuotaStore()
    results, records = store.alter(list(entries))
    assert all(r.error == ErrorCode.NONE for r in results), results
    for r in records:
        store.apply(r)
    return store


def errors(store: QuotaStore, *entries: tuple[list, list]) -> list[tuple[ErrorCode, str | None]]:
    results, _ = store.alter(list(entries))
    return [(r.error, r.message) for r in results]


def test_alter_validates_as_kafkas_controller() -> None:
    s = QuotaStore()
    bad = ErrorCode.INVALID_REQUEST
    assert errors(s, ([], [(PRODUCER_BYTE_RATE, 1.0)])) == [(bad, "Invalid empty client quota entity")]
    assert errors(s, ([("group", "g")], [(PRODUCER_BYTE_RATE, 1.0)])) == [
        (bad, "Unhandled client quota entity type: group")]
    assert errors(s, ([(U, "")], [(PRODUCER_BYTE_RATE, 1.0)])) == [(bad, "Empty user not supported")]
    assert errors(s, ([(U, "a"), ("ip", "1.2.3.4")], [("connection_creation_rate", 1.0)])) == [
        (bad, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")]
    assert errors(s, ([("ip", "not an ip")], [("connection_creation_rate", 1.0)])) == [
        (bad, "not an ip is not a valid IP or resolvable host.")]
    assert errors(s, ([(U, "a")], [("connection_creation_rate", 1.0)])) == [
        (bad, "Invalid configuration key connection_creation_rate")]
    assert errors(s, ([(U, "a")], [(PRODUCER_BYTE_RATE, 0.0)])) == [
        (bad, "Quota producer_byte_rate must be greater than 0")]
    assert errors(s, ([(U, "a")], [(PRODUCER_BYTE_RATE, 1.5)])) == [
        (bad, "producer_byte_rate cannot be a fractional value.")]
    assert errors(s, ([(U, "a")], [(CONSUMER_BYTE_RATE, 1e19)])) == [
        (bad, "Proposed value for consumer_byte_rate is too large for a LONG.")]
    assert errors(s, ([("ip", None)], [("connection_creation_rate", 3e9)])) == [
        (bad, "Proposed value for connection_creation_rate is too large for an INT.")]
    # doubles may be fractional
    assert errors(s, ([(U, "a")], [(REQUEST_PERCENTAGE, 12.5), ("controller_mutation_rate", 0.5)])) == [
        (ErrorCode.NONE, None)]


def test_duplicates_as_kafka_reports_them() -> None:
    s = QuotaStore()
    entity = [(U, "a"), (C, None)]
    # a key twice: the entity is refused, with Kafka's (overwritten) message
    assert errors(s, (entity, [(PRODUCER_BYTE_RATE, 1.0), (PRODUCER_BYTE_RATE, 2.0)])) == [
        (ErrorCode.INVALID_REQUEST, "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=null, user=a})")]
    # the same entity twice: one result, the error; the first alteration's records are still written
    results, records = s.alter([(entity, [(PRODUCER_BYTE_RATE, 1.0)]), (entity, [(CONSUMER_BYTE_RATE, 2.0)])])
    assert [(r.error, r.message) for r in results] == [
        (ErrorCode.INVALID_REQUEST, "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=null, user=a})")]
    assert [r["key"] for r in records] == [PRODUCER_BYTE_RATE]


def test_entity_str_is_javas_map() -> None:
    assert entity_str([(U, "alice")]) == "ClientQuotaEntity(entries={user=alice})"
    assert entity_str([(U, "u"), (C, "c")]) == "ClientQuotaEntity(entries={client-id=c, user=u})"


def test_records_only_for_changes_and_removal() -> None:
    s = store_with(([(U, "a")], [(PRODUCER_BYTE_RATE, 100.0)]))
    _, records = s.alter([([(U, "a")], [(PRODUCER_BYTE_RATE, 100.0), (CONSUMER_BYTE_RATE, None)])])
    assert records == []  # unchanged value, removal of an unset key
    _, records = s.alter([([(U, "a")], [(PRODUCER_BYTE_RATE, None)])])
    assert records == [{"t": "quota", "entity": [[U, "a"]], "key": PRODUCER_BYTE_RATE, "remove": True}]
    s.apply(records[0])
    assert len(s) == 0 and not s.enforced


def test_snapshot_replays_to_the_same_store() -> None:
    s = store_with(([(U, "a"), (C, None)], [(PRODUCER_BYTE_RATE, 100.0), (REQUEST_PERCENTAGE, 50.0)]),
                   ([(C, None)], [(CONSUMER_BYTE_RATE, 7.0)]))
    t = QuotaStore()
    for r in s.snapshot():
        t.apply(r)
    assert t.describe([], False) == s.describe([], False)
    assert t.enforced == {PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE}


def test_describe_filters() -> None:
    s = store_with(([(U, "a")], [(PRODUCER_BYTE_RATE, 1.0)]),
                   ([(U, None)], [(PRODUCER_BYTE_RATE, 2.0)]),
                   ([(U, "a"), (C, "c")], [(PRODUCER_BYTE_RATE, 3.0)]),
                   ([(C, None)], [(PRODUCER_BYTE_RATE, 4.0)]),
                   ([("ip", "10.0.0.1")], [("connection_creation_rate", 5.0)]))

    def found(components: list, strict: bool = False) -> set:
        return {v[PRODUCER_BYTE_RATE] if PRODUCER_BYTE_RATE in v else v["connection_creation_rate"]
                for _, v in s.describe(components, strict)}

    assert found([]) == {1, 2, 3, 4, 5}
    assert found([], strict=True) == set()
    assert found([(U, 0, "a")]) == {1, 3}
    assert found([(U, 0, "a")], strict=True) == {1}
    assert found([(U, 1, None)]) == {2}
    assert found([(U, 2, None)]) == {1, 2, 3}
    assert found([(U, 2, None), (C, 2, None)], strict=True) == {3}
    assert found([(C, 1, None)], strict=True) == {4}
    assert found([("ip", 2, None)]) == {5}
    for components, code, message in [
        ([("", 0, "x")], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
        ([(U, 0, "a"), (U, 2, None)], ErrorCode.INVALID_REQUEST,
         "Entity type user cannot appear more than once in the filter."),
        ([("group", 2, None)], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group"),
        ([(U, 0, None)], ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."),
        ([(U, 1, "a")], ErrorCode.INVALID_REQUEST,
         "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
        ([(U, 2, "a")], ErrorCode.INVALID_REQUEST,
         "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
        ([(U, 7, None)], ErrorCode.INVALID_REQUEST, "Unknown match type 7"),
        ([("ip", 2, None), (C, 2, None)], ErrorCode.INVALID_REQUEST,
         "Invalid entity filter component combination. IP filter component should not be used with user or "
         "clientId filter component."),
    ]:
        with pytest.raises(QuotaFilterError) as e:
            s.describe(components, False)
        assert (e.value.code, e.value.message) == (code, message)


# Kafka's eight levels, most specific first: (user, client-id) entity components, None = default
LEVELS = [
    [(U, "alice"), (C, "app")],
    [(U, "alice"), (C, None)],
    [(U, "alice")],
    [(U, None), (C, "app")],
    [(U, None), (C, None)],
    [(U, None)],
    [(C, "app")],
    [(C, None)],
]


def test_precedence_is_kafkas() -> None:
    for first in range(len(LEVELS)):
        s = store_with(*[(LEVELS[i], [(PRODUCER_BYTE_RATE, float(1000 + i))]) for i in range(first, len(LEVELS))])
        tags = s.metric_tags(PRODUCER_BYTE_RATE, "alice", "app")
        assert s.limit(PRODUCER_BYTE_RATE, tags) == 1000 + first, first
    # which clients share one rate
    s = store_with(([(U, "alice")], [(PRODUCER_BYTE_RATE, 10.0)]), ([(C, None)], [(PRODUCER_BYTE_RATE, 20.0)]))
    assert s.metric_tags(PRODUCER_BYTE_RATE, "alice", "x") == s.metric_tags(PRODUCER_BYTE_RATE, "alice", "y") \
        == ("alice", "")
    assert s.metric_tags(PRODUCER_BYTE_RATE, "bob", "x") == ("", "x")
    assert s.limit(PRODUCER_BYTE_RATE, ("", "x")) == 20
    # another quota type is looked up on its own
    assert s.limit(CONSUMER_BYTE_RATE, s.metric_tags(CONSUMER_BYTE_RATE, "alice", "x")) is None
    # a user default applies to ANONYMOUS, which is just a user name
    s = store_with(([(U, None)], [(PRODUCER_BYTE_RATE, 5.0)]))
    assert quota_user("User:ANONYMOUS") == "ANONYMOUS" and quota_user("User:alice") == "alice"
    assert s.limit(PRODUCER_BYTE_RATE, s.metric_tags(PRODUCER_BYTE_RATE, "ANONYMOUS", "")) == 5


def test_rate_windows() -> None:
    r = Rate(11, 1000)
    r.record(1000, 0)
    # a young rate is taken over (samples - 1) whole windows at least
    assert r.window_size(0) == 10_000 and r.measure(0) == pytest.approx(100.0)
    assert r.window_size(500) == 10_500
    # after 20 s with records every second, the window is the 11 samples' span
    for t in range(1000, 20_001, 1000):
        r.record(1000, t)
    assert r.window_size(20_000) == 11_000 - 1000 + 0  # oldest sample starts 10 s back
    assert r.measure(20_000) == pytest.approx(11 * 1000 / 10.0)
    # samples with no event for samples * window are forgotten
    assert r.measure(40_000) == 0


def test_throttle_time_formula() -> None:
    s = store_with(([(C, "app")], [(PRODUCER_BYTE_RATE, 1000.0)]))
    q = QuotaEnforcer(s, samples=11, window_seconds=1)
    assert q.record(PRODUCER_BYTE_RATE, "ANONYMOUS", "other", 10**9, 0) == 0  # no quota applies
    assert q.record(PRODUCER_BYTE_RATE, "ANONYMOUS", "app", 10_000, 0) == 0  # exactly at the bound: 10 s window
    # 5000 more: O = 15000 / 10 s = 1500, T = 1000: X = (O - T) / T * W = 0.5 * 10 s
    assert q.record(PRODUCER_BYTE_RATE, "ANONYMOUS", "app", 5000, 0) == 5000
    # byte rates are not capped: a huge produce asks for a long throttle
    assert q.record(PRODUCER_BYTE_RATE, "ANONYMOUS", "app", 1_000_000, 0) > 900_000
    # the most one fetch may take: quota * (samples - 1) * window
    s2 = store_with(([(C, None)], [(CONSUMER_BYTE_RATE, 2000.0), (REQUEST_PERCENTAGE, 10.0)]))
    q2 = QuotaEnforcer(s2, samples=11, window_seconds=1)
    assert q2.max_value_in_window(CONSUMER_BYTE_RATE, "u", "c") == 20_000
    assert q2.max_value_in_window(PRODUCER_BYTE_RATE, "u", "c") is None
    # a throttled fetch's bytes are taken back
    assert q2.record(CONSUMER_BYTE_RATE, "u", "c", 30_000, 0) == 5000
    q2.unrecord(CONSUMER_BYTE_RATE, "u", "c", 30_000, 0)
    assert q2.record(CONSUMER_BYTE_RATE, "u", "c", 10_000, 0) == 0
    # request time is capped at one window: 100 s of handling against 10%
    assert q2.record(REQUEST_PERCENTAGE, "u", "c", 100 * 100.0, 0) == 1000


def test_quota_changes_apply_to_running_rates() -> None:
    s = store_with(([(C, "app")], [(PRODUCER_BYTE_RATE, 1000.0)]))
    q = QuotaEnforcer(s)
    assert q.record(PRODUCER_BYTE_RATE, "u", "app", 15_000, 0) == 5000
    _, records = s.alter([([(C, "app")], [(PRODUCER_BYTE_RATE, 10_000.0)])])
    for r in records:
        s.apply(r)
    assert q.record(PRODUCER_BYTE_RATE, "u", "app", 1, 0) == 0
    assert entity_of([(U, "x"), (C, None)]) == ((C, None), (U, "x"))
