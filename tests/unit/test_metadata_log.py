"""The cluster metadata log: changes append, a start replays them, a torn tail is cut, snapshots."""

from __future__ import annotations

import json
import uuid

from shoal.broker.metadata import ClusterMetadata
from shoal.broker.metadata_log import LEGACY_JSON, LOG_NAME


def test_changes_survive_a_restart(tmp_path):
    md = ClusterMetadata("c", [0, 1, 2], tmp_path)
    a = md.create_topic("a", 3, 2, {"retention.ms": "100"})
    md.create_topic("b", 1, 1)
    md.add_partitions("a", 5)
    md.set_topic_configs("a", {"cleanup.policy": "compact"})
    md.delete_topic("b")
    md.create_topic("b", 2, 1)
    md.set_broker_configs("", {"log.retention.ms": "5"})
    md.set_broker_configs("1", {"log.cleaner.backoff.ms": "7"})
    md.close()

    again = ClusterMetadata("c", [0, 1, 2], tmp_path)
    assert again.topics["a"].topic_id == a.topic_id
    assert again.topics["a"].num_partitions == 5 and again.topics["a"].replicas == md.topics["a"].replicas
    assert again.topics["a"].configs == {"cleanup.policy": "compact"}
    assert again.topics["b"].num_partitions == 2 and again.topics["b"].topic_id == md.topics["b"].topic_id
    assert again.broker_configs == {"": {"log.retention.ms": "5"}, "1": {"log.cleaner.backoff.ms": "7"}}
    assert again.leader("a", 4) >= 0 and again.by_id[a.topic_id].name == "a"


def test_a_torn_tail_is_cut_at_the_last_whole_record(tmp_path):
    md = ClusterMetadata("c", [0], tmp_path)
    md.create_topic("kept", 1, 1)
    md.create_topic("torn", 1, 1)
    md.close()
    path = tmp_path / LOG_NAME
    data = path.read_bytes()
    path.write_bytes(data[:-7])  # a crash in the middle of the second append
    again = ClusterMetadata("c", [0], tmp_path)
    assert list(again.topics) == ["kept"]
    again.create_topic("after", 1, 1)  # appends after the cut, not after the garbage
    again.close()
    assert sorted(ClusterMetadata("c", [0], tmp_path).topics) == ["after", "kept"]
    # a flipped byte in a record's body fails its checksum: that record and what follows are dropped
    data = path.read_bytes()
    first_end = data.index(b"\n") + 1
    corrupt = data[:first_end + 20] + bytes([data[first_end + 20] ^ 1]) + data[first_end + 21:]
    path.write_bytes(corrupt)
    assert list(ClusterMetadata("c", [0], tmp_path).topics) == ["kept"]


def test_history_is_rewritten_as_a_snapshot(tmp_path):
    md = ClusterMetadata("c", [0], tmp_path, fsync=False)
    md.create_topic("t", 1, 1)
    for i in range(1500):
        md.set_topic_configs("t", {"i": str(i)})
    md.close()
    lines = (tmp_path / LOG_NAME).read_bytes().count(b"\n")
    assert lines < 1100  # rewritten at least once: not 1,501 records
    assert ClusterMetadata("c", [0], tmp_path).topics["t"].configs == {"i": "1499"}


def test_the_json_file_of_older_versions_is_migrated(tmp_path):
    tid = uuid.uuid4()
    (tmp_path / LEGACY_JSON).write_text(json.dumps({
        "cluster_id": "c", "topics": [{"name": "old", "id": str(tid), "replicas": [[0], [0]],
                                       "configs": {"retention.ms": "9"}}],
        "broker_configs": {"": {"log.retention.ms": "3"}}}))
    md = ClusterMetadata("c", [0], tmp_path)
    assert md.topics["old"].topic_id == tid and md.topics["old"].configs == {"retention.ms": "9"}
    assert md.broker_configs == {"": {"log.retention.ms": "3"}}
    assert not (tmp_path / LEGACY_JSON).exists() and (tmp_path / LOG_NAME).exists()
    md.close()
    assert ClusterMetadata("c", [0], tmp_path).topics["old"].num_partitions == 2


def test_a_change_appends_its_own_record_only(tmp_path):
    """The defect: every change rewrote the whole state, so the n-th topic cost O(n)."""
    md = ClusterMetadata("c", [0], tmp_path, fsync=False)
    for i in range(3000):
        md.create_topic(f"t{i}", 4, 1)
    path = tmp_path / LOG_NAME
    before = path.read_bytes()
    md.create_topic("one-more", 4, 1)
    after = path.read_bytes()
    assert after.startswith(before)  # nothing rewritten
    assert after[len(before):].count(b"\n") == 1 and len(after) - len(before) < 300
    md.close()
