"""KIP-848 regex subscriptions (SubscribedTopicRegex, ConsumerGroupHeartbeat v1): RE2/J's syntax,
whole-name matching, resolution against the topics as they change, and the resolutions kept in
ConsumerGroupRegularExpression records (key version 16) as Kafka 4.1+ keeps them."""

from __future__ import annotations

import pytest

from shoal.coordinator.group.consumer import records as R
from shoal.coordinator.group.consumer.regex import compile_regex, invalid_regex_message, resolve
from shoal.protocol.errors import ErrorCode as E
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.offset_delete_request import OffsetDeleteRequest
from tests.unit.consumer_group_harness import CGHarness, Consumer, converge, replayed, snapshot


class RegexConsumer(Consumer):
    """A consumer subscribing with a regex (and optionally names)."""

    def __init__(self, h: CGHarness, member_id: str, regex: str, topics: list[str] | None = None) -> None:
        super().__init__(h, member_id)
        self.regex, self.names = regex, topics

    def join(self) -> object:
        self.owned = {}
        return self._apply(self.h.hb(self.member_id, 0, topics=self.names, regex=self.regex, owned={},
                                     rebalance=self.rebalance))

    def topics_owned(self) -> set[str]:
        return {self.h.topics.by_id(t).name for t, ps in self.owned.items() if ps}  # type: ignore[union-attr]


# ---------------------------------------------------------------- the dialect
@pytest.mark.parametrize("pattern, matches, misses", [
    ("^re-.*", ["re-1", "re-"], ["xre-1", "re"]),
    ("orders-.*", ["orders-eu"], ["reorders-eu", "orders"]),       # the whole name must match
    ("orders", ["orders"], ["orders-v2"]),
    ("a(?i)b|c", ["ab", "aB", "C"], ["Ab", "ac"]),                  # RE2: (?i) holds across | to the group's end
    (r"\Qa.b\E.*", ["a.b", "a.bc"], ["axb"]),
    (r"[[:digit:]]+", ["42"], ["4a"]),
    (r"\pL+", ["abc"], ["a1"]),
    (r"(?P<env>dev|prod)\.events", ["dev.events"], ["qa.events"]),
    (r"(?<env>dev)-x", ["dev-x"], []),
    (r"t{2,3}", ["tt", "ttt"], ["t", "tttt"]),
    (r"t{,2}", ["t{,2}"], ["tt"]),                                   # no repeat in RE2: a literal
    (r"x\z", ["x"], []),
])
def test_re2j_patterns_match_whole_names(pattern: str, matches: list[str], misses: list[str]) -> None:
    assert invalid_regex_message(pattern) is None
    rx = compile_regex(pattern)
    assert all(rx.fullmatch(n) for n in matches) and not any(rx.fullmatch(n) for n in misses)


@pytest.mark.parametrize("pattern, reason", [
    (r"(a)\1", "invalid escape sequence"),                 # backreference
    ("(?=a)a", "invalid or unsupported Perl syntax"),      # lookahead
    ("(?!a)b", "invalid or unsupported Perl syntax"),
    ("(?<=a)b", "invalid or unsupported Perl syntax"),     # lookbehind
    ("(?<!a)b", "invalid or unsupported Perl syntax"),
    ("(?>a)", "invalid or unsupported Perl syntax"),       # atomic group
    ("(?x)a", "invalid or unsupported Perl syntax"),       # a flag RE2 does not have
    ("a*+", "invalid nested repetition operator"),         # possessive
    ("a**", "invalid nested repetition operator"),
    ("*a", "missing argument to repetition operator"),
    ("(a", "missing closing )"),
    ("[a", "missing closing ]"),
    ("[z-a]", "invalid character class range"),
    (r"a\Z", "invalid escape sequence"),
    ("a{1001}", "invalid repeat count"),
    ("a\\", "trailing backslash at end of expression"),
    ("(?P<n>a)(?P<n>b)", "duplicate capture group name"),
])
def test_patterns_re2j_refuses(pattern: str, reason: str) -> None:
    assert invalid_regex_message(pattern) == \
        f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {reason}."


def test_resolution_includes_internal_topics_as_kafka() -> None:
    names = ["__consumer_offsets", "re-a", "a"]
    assert resolve(["__.*", "re-.*", "(bad"], names) == {
        "__.*": frozenset({"__consumer_offsets"}), "re-.*": frozenset({"re-a"}), "(bad": frozenset()}


# ---------------------------------------------------------------- the heartbeat
def test_join_with_an_invalid_regex_is_refused_and_writes_nothing() -> None:
    h = CGHarness()
    r = h.hb("a", 0, regex="(?=t)t", owned={}, rebalance=1000)
    assert (r.error_code, r.error_message) == (
        E.INVALID_REGULAR_EXPRESSION,
        "SubscribedTopicRegex `(?=t)t` is not a valid regular expression: invalid or unsupported Perl syntax.")
    assert h.records == [] and "g" not in h.shard.groups


def test_regex_subscription_gets_the_matching_topics_only() -> None:
    h = CGHarness(topics={"re-a": 2, "re-b": 1, "other": 3, "xre-c": 1})
    a = RegexConsumer(h, "a", "re-.*")
    r = a.join()
    assert r.error_code == 0 and a.topics_owned() == {"re-a", "re-b"}
    m = h.cgroup().members["a"]
    assert (m.subscribed_topic_regex, m.subscribed_topic_names) == ("re-.*", ())
    assert set(h.cgroup().subscription_metadata) == {"re-a", "re-b"}


def test_names_and_regex_are_one_subscription() -> None:
    h = CGHarness(topics={"re-a": 1, "other": 1, "t": 1})
    a = RegexConsumer(h, "a", "re-.*", ["other"])
    a.join()
    assert a.topics_owned() == {"re-a", "other"}


def test_a_topic_created_later_bumps_the_epoch_at_any_members_heartbeat() -> None:
    h = CGHarness(topics={"re-a": 2, "t": 2})
    a, b = RegexConsumer(h, "a", "re-.*"), Consumer(h, "b", ["t"])
    a.join()
    b.join()
    converge([a, b])
    epoch = h.cgroup().group_epoch
    h.set_topic("re-new", 3)
    b.beat()  # not a member subscribed by regex: still the heartbeat that sees the new topic
    assert h.cgroup().group_epoch == epoch + 1
    assert "re-new" in h.cgroup().subscription_metadata
    converge([a, b])
    assert a.topics_owned() == {"re-a", "re-new"} and b.partitions("t") == {0, 1}


def test_a_deleted_topic_leaves_the_resolution() -> None:
    h = CGHarness(topics={"re-a": 2, "re-b": 2})
    a = RegexConsumer(h, "a", "re-.*")
    a.join()
    h.topics.remove("re-b")
    a.beat()
    converge([a])
    assert a.topics_owned() == {"re-a"} and h.cgroup().resolved_regexes == {"re-.*": frozenset({"re-a"})}


def test_changing_or_clearing_the_regex_moves_the_subscription() -> None:
    h = CGHarness(topics={"re-a": 1, "x-a": 1, "t": 1})
    a = RegexConsumer(h, "a", "re-.*")
    a.join()
    epoch = h.cgroup().group_epoch
    a._apply(h.hb("a", a.epoch, regex="x-.*", owned=a.owned))
    converge([a])
    assert h.cgroup().group_epoch == epoch + 1 and a.topics_owned() == {"x-a"}
    # librdkafka's way back to names: an empty regex with the names
    a._apply(h.hb("a", a.epoch, regex="", topics=["t"], owned=a.owned))
    converge([a])
    assert h.cgroup().members["a"].subscribed_topic_regex is None and a.topics_owned() == {"t"}


def test_an_invalid_regex_later_changes_nothing() -> None:
    h = CGHarness(topics={"re-a": 1})
    a = RegexConsumer(h, "a", "re-.*")
    a.join()
    before = list(h.records)
    r = h.hb("a", a.epoch, regex="re-(", owned=a.owned)
    assert r.error_code == E.INVALID_REGULAR_EXPRESSION and h.records == before
    assert h.cgroup().members["a"].subscribed_topic_regex == "re-.*"


def test_join_with_an_empty_list_of_names_is_accepted() -> None:
    h = CGHarness()
    r = h.hb("a", 0, topics=[], owned={}, rebalance=1000)
    assert r.error_code == 0 and r.assignment.topic_partitions == []


def test_describe_reports_the_regex() -> None:
    h = CGHarness(topics={"re-a": 1})
    RegexConsumer(h, "a", "re-.*").join()
    member = h.describe_cg("g").groups[0].members[0]
    assert (member.subscribed_topic_regex, member.subscribed_topic_names) == ("re-.*", [])


def test_offsets_of_a_topic_the_regex_matches_are_in_use() -> None:
    h = CGHarness(topics={"re-a": 1, "t": 1})
    RegexConsumer(h, "a", "re-.*").join()
    req = OffsetDeleteRequest(group_id="g", topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
        name="re-a", partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])])
    resp = h.resp(h.send(ApiKey.OFFSET_DELETE, 0, req))
    assert resp.topics[0].partitions[0].error_code == E.GROUP_SUBSCRIBED_TO_TOPIC


def _regex_records(h: CGHarness) -> list[tuple[str, list[str] | None]]:
    out = []
    for key, value in h.records:
        if R.decode_key(key)[0] == R.REGULAR_EXPRESSION:
            regex = R.decode_key(key)[2] or ""
            out.append((regex, None if value is None else R.decode_value(R.REGULAR_EXPRESSION, value).topics))
    return out


def test_each_new_resolution_is_a_record_and_a_regex_nobody_uses_a_tombstone() -> None:
    h = CGHarness(topics={"re-a": 1, "t": 1})
    a, b = RegexConsumer(h, "a", "re-.*"), RegexConsumer(h, "b", "re-.*")
    a.join()
    assert _regex_records(h) == [("re-.*", ["re-a"])]
    b.join()
    converge([a, b])
    assert _regex_records(h) == [("re-.*", ["re-a"])]  # unchanged: no second record
    h.set_topic("re-b", 1)
    a.beat()
    assert _regex_records(h)[-1] == ("re-.*", ["re-a", "re-b"])
    a.leave()
    assert len(_regex_records(h)) == 2  # b still subscribes with it
    b.leave()
    assert _regex_records(h)[-1] == ("re-.*", None)
    assert h.cgroup().resolved_regexes == {}


def test_deleting_a_group_tombstones_its_regexes() -> None:
    h = CGHarness(topics={"re-a": 1})
    a = RegexConsumer(h, "a", "re-.*")
    a.join()
    records = h.cgroup().tombstone_records()
    assert R.regex_tombstone("g", "re-.*") in records
    assert records.index(R.regex_tombstone("g", "re-.*")) == len(records) - 3  # before the metadata and epoch


def test_regex_record_is_kafkas() -> None:
    # A ConsumerGroupRegularExpression record as Kafka 4.4 writes it: key type 16 (group, regex), value
    # version 0 with the topics, the metadata version and the time, and no tagged fields.
    key, value = R.regex_record("g-rx", "(^rx-.*)", frozenset({"rx-b", "rx-a"}), 1795638219832)
    assert key == bytes.fromhex("0010" "0004") + b"g-rx" + bytes.fromhex("0008") + b"(^rx-.*)"
    assert value == (bytes.fromhex("0000" "03" "05") + b"rx-a" + bytes.fromhex("05") + b"rx-b"
                     + (0).to_bytes(8, "big") + (1795638219832).to_bytes(8, "big") + b"\x00")


def test_replay_keeps_the_resolutions_of_the_records() -> None:
    h = CGHarness(topics={"re-a": 2, "t": 1})
    a = RegexConsumer(h, "a", "re-.*")
    a.join()
    converge([a])
    fresh = replayed(h)
    assert fresh.groups["g"].resolved_regexes == {"re-.*": frozenset({"re-a"})}  # type: ignore[attr-defined]
    fresh.on_loaded(h.now)
    group = fresh.groups["g"]
    assert group.resolved_regexes == {"re-.*": frozenset({"re-a"})}  # type: ignore[attr-defined]
    assert snapshot(fresh) == snapshot(h.shard)
    # The loaded shard goes on: an unchanged heartbeat keeps the epoch, a new topic bumps it.
    h.shard = fresh
    epoch = group.group_epoch  # type: ignore[attr-defined]
    assert a.beat().member_epoch == epoch
    h.set_topic("re-b", 1)
    a.beat()
    converge([a])
    assert h.cgroup().group_epoch == epoch + 1 and a.topics_owned() == {"re-a", "re-b"}


def test_fencing_a_member_drops_its_regex_topics() -> None:
    h = CGHarness(topics={"re-a": 1, "t": 1})
    a, b = RegexConsumer(h, "a", "re-.*"), Consumer(h, "b", ["t"])
    a.join()
    b.join()
    converge([a, b])
    assert h.hb("a", -1).error_code == 0  # leaves
    assert set(h.cgroup().subscription_metadata) == {"t"} and h.cgroup().resolved_regexes == {}
