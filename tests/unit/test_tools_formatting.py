"""Pure helpers of the `shoal groups` / `shoal offsets` tools: tables, lag, states, versions, dump lines."""

from __future__ import annotations

import pytest

from shoal.client.config import parse_bootstrap
from shoal.coordinator.group.records import (
    OffsetAndMetadata,
    group_metadata_key,
    group_metadata_value,
    offset_commit_key,
    offset_commit_record,
)
from shoal.protocol.generated.group_metadata_value import GroupMetadataValue
from shoal.protocol.record_encode import build_batch, build_control_batch
from shoal.tools.groups import (
    GroupDescription,
    MemberInfo,
    PartitionInfo,
    format_description,
    normalize_states,
)
from shoal.tools.offsets_dump import DumpStats, format_fetched
from shoal.tools.table import compact_partitions, format_table, lag
from shoal.tools.wire import ToolClient, ToolError, pick_version


def test_format_table_aligns_columns_and_prints_none_as_dash() -> None:
    text = format_table(["A", "LONGER"], [("xyz", None), (1, "b")])
    assert text.splitlines() == ["A    LONGER", "xyz  -", "1    b"]


def test_compact_partitions_groups_and_sorts_by_topic() -> None:
    assert compact_partitions([("t", 3), ("a", 1), ("t", 0)]) == "a(1),t(0,3)"
    assert compact_partitions([]) == "-"


@pytest.mark.parametrize(("committed", "end", "expected"), [
    (20, 25, 5), (25, 25, 0), (None, 25, None), (-1, 25, None), (3, None, None), (30, 25, -5),
])
def test_lag_is_log_end_minus_committed_when_both_known(committed, end, expected) -> None:
    assert lag(committed, end) == expected


def test_normalize_states_is_case_insensitive_and_splits_commas() -> None:
    assert normalize_states(["stable,EMPTY", "preparingrebalance"]) == ["Stable", "Empty", "PreparingRebalance"]
    with pytest.raises(ToolError, match="unknown group state 'Bogus'"):
        normalize_states(["Bogus"])


def test_parse_bootstrap() -> None:
    assert parse_bootstrap("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_bootstrap("nohost") == [("nohost", 9092)]
    for bad in ("h:", ":9", "h:x"):
        with pytest.raises(ValueError, match="expected HOST:PORT"):
            parse_bootstrap(bad)


def test_tools_report_a_bad_bootstrap_before_connecting() -> None:
    for bad, message in (("h:", "bad bootstrap server 'h:'"), (":9", "bad bootstrap server ':9'"),
                         ("", "no bootstrap server given"), (" , ", "no bootstrap server given")):
        with pytest.raises(ToolError, match=message):
            ToolClient(bad)


def test_pick_version_is_the_highest_common_version() -> None:
    assert pick_version((0, 9), (0, 12)) == 9
    assert pick_version((3, 17), (0, 12)) == 12
    assert pick_version((3, 17), (0, 12), cap=7) == 7
    assert pick_version((5, 9), (0, 4)) is None
    assert pick_version(None, (0, 4)) is None


def test_format_description_shows_members_partitions_lag_and_owner() -> None:
    m = MemberInfo("c0-1", None, "c0", "/127.0.0.1", [("t", 0), ("t", 1)])
    desc = GroupDescription("g", (0, "127.0.0.1", 9092), "Stable", "consumer", "range", [m], [
        PartitionInfo("t", 0, 20, 25, m), PartitionInfo("t", 1, None, 7, m), PartitionInfo("u", 0, 3, 3, None)])
    text = format_description(desc)
    assert "State:          Stable" in text and "Assignor:       range" in text
    rows = [line.split() for line in text.splitlines()]
    assert ["c0-1", "-", "c0", "/127.0.0.1", "2", "t(0,1)"] in rows
    assert ["g", "t", "0", "20", "25", "5", "c0-1", "/127.0.0.1", "c0"] in rows
    assert ["g", "t", "1", "-", "7", "-", "c0-1", "/127.0.0.1", "c0"] in rows
    assert ["g", "u", "0", "3", "3", "0", "-", "-", "-"] in rows
    assert "leader" not in text.lower()  # DescribeGroups does not tell us


def test_format_description_of_empty_group() -> None:
    desc = GroupDescription("g", (1, "h", 1), "Empty", "consumer", "", [], [PartitionInfo("t", 0, 4, 9, None)])
    text = format_description(desc)
    assert "Consumer group 'g' has no active members." in text
    assert ["g", "t", "0", "4", "9", "5", "-", "-", "-"] in [line.split() for line in text.splitlines()]


def _batch(records: list[tuple[bytes, bytes | None]], base_offset: int) -> bytes:
    return build_batch([(1000, k, v, []) for k, v in records], base_offset=base_offset)


def test_format_fetched_prints_commits_tombstones_and_group_metadata_in_kafka_format() -> None:
    commit = offset_commit_record("grp", "topic", 3, OffsetAndMetadata(2130, -1, "", 1538843128354, 1539447928354))
    plain = offset_commit_record("grp", "topic", 4, OffsetAndMetadata(7, -1, "meta", 5))
    tomb = (offset_commit_key("grp", "topic", 3), None)
    gm = (group_metadata_key("grp"), group_metadata_value(GroupMetadataValue(
        protocol_type="consumer", generation=4, protocol="range", leader="m", current_state_timestamp=1, members=[])))
    data = _batch([commit, plain], 10) + _batch([tomb, gm], 12)
    lines: list[str] = []
    stats = DumpStats()
    assert format_fetched(data, 10, 14, lines.append, stats) == 14
    assert lines == [
        "[grp,topic,3]::[OffsetMetadata[2130,NO_METADATA],CommitTime 1538843128354,ExpirationTime 1539447928354]",
        "[grp,topic,4]::[OffsetMetadata[7,meta],CommitTime 5,ExpirationTime -1]",
        "[grp,topic,3]::NULL",
        "grp::GroupMetadata(groupId=grp, generation=4, protocolType=Some(consumer), currentState=Empty, "
        "members=Map())",
    ]
    assert stats.printed == 4


def test_format_fetched_skips_records_before_the_fetch_offset_and_after_the_end() -> None:
    recs = [offset_commit_record("g", "t", p, OffsetAndMetadata(p, -1, "", 1)) for p in range(4)]
    lines: list[str] = []
    assert format_fetched(_batch(recs, 100), 101, 103, lines.append, DumpStats()) == 104
    assert [line.split("::")[0] for line in lines] == ["[g,t,1]", "[g,t,2]"]


def test_format_fetched_moves_past_control_batches_and_counts_unknown_records() -> None:
    marker = build_control_batch(1, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                 base_offset=5, timestamp=1)
    unknown = _batch([(b"\x00\x09junk", b"x")], 6)
    stats = DumpStats()
    lines: list[str] = []
    assert format_fetched(marker + unknown, 5, 7, lines.append, stats) == 7
    assert lines == [] and stats.skipped == 1
