"""Non-JVM clients at their current versions, from their registries, against a real ``shoal serve`` (issue
17, part 6): franz-go (consumer groups, classic and KIP-848, transactions and a GroupTransactSession),
IBM/sarama, segmentio/kafka-go, KafkaJS 2.2.4 and @confluentinc/kafka-javascript.

Each client runs a driver program of tests/interop/clients/<name>/ over loopback against a one-node and a
three-node shoal. A driver creates its topics and reads their metadata back with the client's admin,
produces keyed records (idempotently where the client can), consumes them in a consumer group committing
as it goes, reads the committed offsets back, and runs transactions (commit, abort, commit) read back with
read_committed where the client has them; it prints one JSON summary. The test checks the summary (every
record once, offsets in order within a partition, committed offsets at the end of each partition, only
committed transactions visible) and checks it again from outside: confluent-kafka reads the high watermarks,
the group's committed offsets and its type (classic or consumer), DescribeProducers shows the idempotent
producer's id and last sequence in every partition.

Builds are cached outside the checkout: Go programs in ``~/.cache/shoal/go/bin`` by a hash of their sources
(modules from the Go module proxy), npm packages in ``~/.cache/shoal/npm/<name>-<hash>`` by a hash of
package.json and package-lock.json (``npm ci`` from the npm registry). @confluentinc/kafka-javascript has
no reachable prebuilt binary here (GitHub releases); it is compiled from its bundled librdkafka against
the system's OpenSSL and zlib (``CKJS_LINKING=dynamic``, Node's headers from ``/usr/include/node``).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.builds import build_go, die_with_parent, install_npm
from tests.interop.shoal_process import ShoalProcess

# A first run builds the Go drivers and compiles librdkafka (minutes); once cached the module takes well
# under a minute and a half.
pytestmark = pytest.mark.timeout(1500)

CLIENTS = Path(__file__).parent / "clients"
NODE = os.environ.get("SHOAL_NODE", "node")
N = 40  # records each driver produces
PARTS = 3
DRIVER_TIMEOUT = 120.0


GO_DRIVERS = ("franzgo", "sarama", "kafkago")
NPM_DRIVERS = ("kafkajs", "confluent-js")


def prebuild() -> None:
    """Build every driver into the cache (scripts/test.sh runs this beside its other installs)."""
    for name in GO_DRIVERS:
        build_go(CLIENTS / name, f"{name}-driver")
    for name in NPM_DRIVERS:
        install_npm(CLIENTS / name)


@pytest.fixture(scope="module")
def go_driver() -> Iterator[Any]:
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = build_go(CLIENTS / name, f"{name}-driver")
        return built[name]

    yield get


@pytest.fixture(scope="module")
def node_modules() -> Iterator[Any]:
    installed: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in installed:
            installed[name] = install_npm(CLIENTS / name)
        return installed[name]

    yield get


# ------------------------------------------------------------------ brokers
@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, ShoalProcess]]:
    """A one-node and a three-node shoal for the whole module (each test uses its own topics and groups)."""
    root = tmp_path_factory.mktemp("shoal-go-js")
    started: dict[int, ShoalProcess] = {}
    try:
        for nodes in (1, 3):
            started[nodes] = ShoalProcess(root / f"data{nodes}", nodes).start()
        yield started
    finally:
        for proc in started.values():
            proc.stop()


@pytest.fixture(params=[1, 3], ids=["1node", "3nodes"])
def shoal_bs(request: pytest.FixtureRequest, brokers: dict[int, ShoalProcess]) -> tuple[str, ShoalProcess]:
    proc = brokers[request.param]
    return proc.bootstrap, proc


def run_driver(cmd: list[str], log_dir: Path, name: str, broker: ShoalProcess,
               env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one driver to its end (bounded); its JSON summary, or an AssertionError with its stderr."""
    err_path = log_dir / f"{name}.stderr"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env,
                                preexec_fn=die_with_parent)
        try:
            stdout, _ = proc.communicate(timeout=DRIVER_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=10)
            raise AssertionError(f"{name} did not finish in {DRIVER_TIMEOUT}s; stderr:\n"
                                 f"{err_path.read_text(errors='replace')[-3000:]}") from None
    lines = [line for line in stdout.decode(errors="replace").splitlines() if line.startswith("{")]
    summary: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    if proc.returncode != 0 or not summary or "error" in summary:
        broker_log = broker.log_path.read_text(errors="replace")[-3000:] if broker.log_path.exists() else ""
        raise AssertionError(
            f"{name} failed (exit {proc.returncode}): {summary.get('error')!r}\nsummary: {str(summary)[:2000]}\n"
            f"stderr:\n{err_path.read_text(errors='replace')[-3000:]}\nbroker log:\n{broker_log}")
    return summary


# ------------------------------------------------------------------ checks
Rec = tuple[int, int, str]


def recs(items: list[dict[str, Any]]) -> list[Rec]:
    return [(int(r["p"]), int(r["o"]), str(r["v"])) for r in items]


def end_offsets(produced: list[Rec]) -> dict[int, int]:
    """partition -> the offset after its last produced record (every partition, 0 when empty)."""
    ends = dict.fromkeys(range(PARTS), 0)
    for p, o, _ in produced:
        ends[p] = max(ends[p], o + 1)
    return ends


def check_produced(produced: list[Rec], n: int, prefix: str) -> None:
    """n distinct values, distinct positions; within a partition offsets grow with the send order."""
    assert sorted(v for _, _, v in produced) == sorted(f"{prefix}-{i}" for i in range(n))
    assert len({(p, o) for p, o, _ in produced}) == n, "two records acknowledged at one offset"
    for part in range(PARTS):
        in_part = [(o, int(v.rsplit("-", 1)[1])) for p, o, v in produced if p == part]
        assert in_part == sorted(in_part, key=lambda x: x[1]), f"partition {part}: offsets out of send order"
        assert sorted(o for o, _ in in_part) == list(range(len(in_part))), f"partition {part}: offset gaps"


def check_consumed(consumed: list[Rec], produced: list[Rec]) -> None:
    """Every produced record exactly once, each partition's records in offset order."""
    assert sorted(consumed) == sorted(produced), "consumed records differ from the produced ones"
    for part in range(PARTS):
        offsets = [o for p, o, _ in consumed if p == part]
        assert offsets == sorted(offsets), f"partition {part} consumed out of order: {offsets}"


def check_committed(committed: dict[str, Any], produced: list[Rec]) -> None:
    assert {int(p): int(o) for p, o in committed.items()} == end_offsets(produced)


def outside_view(bootstrap: str, topic: str, group: str) -> tuple[dict[int, int], dict[int, int], Any]:
    """confluent-kafka's view: high watermarks of the topic, the group's committed offsets and description."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"watermarks-{uuid.uuid4().hex[:6]}"})
    try:
        highs = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTS)}
    finally:
        c.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=15)
    offsets = {tp.partition: tp.offset for tp in listed[group].result(20).topic_partitions if tp.topic == topic}
    described = admin.describe_consumer_groups([group], request_timeout=15)[group].result(20)
    return highs, offsets, described


def check_outside(bootstrap: str, topic: str, group: str, produced: list[Rec], group_type: str) -> None:
    highs, offsets, described = outside_view(bootstrap, topic, group)
    assert highs == end_offsets(produced), "high watermarks differ from the acknowledged records"
    assert offsets == end_offsets(produced), "the group's committed offsets, read by confluent-kafka"
    assert described.type.name == group_type, f"group {group} is {described.type.name}, not {group_type}"


def check_idempotent(bootstrap: str, topic: str, produced: list[Rec], idempotent: bool) -> None:
    """DescribeProducers: an idempotent client's one producer id in every partition, its last sequence that
    of the partition's last record; none for a client without idempotence."""
    from shoal.tools.transactions import describe_producers
    from shoal.tools.wire import ToolClient

    with ToolClient(bootstrap) as client:
        producers = describe_producers(client, [(topic, p) for p in range(PARTS)])
    if not idempotent:
        assert producers == [], f"a producer id on a non-idempotent client's records: {producers}"
        return
    counts = {p: n for p, n in end_offsets(produced).items() if n}
    assert {(s.partition, s.last_sequence) for s in producers} == {(p, n - 1) for p, n in counts.items()}
    assert len({s.producer_id for s in producers}) == 1 and producers[0].producer_id >= 0


def check_group_data(summary: dict[str, Any], bootstrap: str, topic: str, group: str, prefix: str,
                     suffix: str = "", idempotent: bool = True) -> list[Rec]:
    """The produce / group-consume / committed-offsets part of a summary; the produced records."""
    assert summary["partitions"][topic] == PARTS
    produced = recs(summary["produced"])
    check_produced(produced, N, prefix)
    check_idempotent(bootstrap, topic, produced, idempotent)
    check_consumed(recs(summary[f"consumed{suffix}"]), produced)
    check_committed(summary[f"committed{suffix}"], produced)
    return produced


TXN_COMMITTED = [f"c1-{i}" for i in range(4)] + [f"c2-{i}" for i in range(3)]


def write_transactions(bootstrap: str, topic: str) -> None:
    """Into a new one-partition topic: a committed, an aborted and a committed transaction (confluent-kafka)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=15)[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"prep-{topic}"})
    p.init_transactions(30)
    for prefix, count, commit in (("c1", 4, True), ("a1", 3, False), ("c2", 3, True)):
        p.begin_transaction()
        for i in range(count):
            p.produce(topic, f"{prefix}-{i}".encode())
        if commit:
            p.commit_transaction(30)
        else:
            p.flush(30)
            p.abort_transaction(30)


def names(prefix: str) -> tuple[str, str, str]:
    tag = uuid.uuid4().hex[:8]
    return f"{prefix}-{tag}", f"{prefix}-{tag}-tx", f"{prefix}-g-{tag}"


# ------------------------------------------------------------------ the clients
@pytest.mark.parametrize("eos_protocol", ["classic", "consumer"])
def test_franz_go(shoal_bs: tuple[str, ShoalProcess], go_driver: Any, tmp_path: Path, eos_protocol: str) -> None:
    """franz-go v1.22.3 / kadm v1.20.0: admin, idempotent produce, a classic (cooperative-sticky) and a
    KIP-848 group (kgo.ServerSideBalancer), a GroupTransactSession (in a classic or a KIP-848 group)
    copying the topic exactly once, an aborted transaction, and a read_committed read of the result."""
    bs, broker = shoal_bs
    topic, out, group = names("franzgo")
    s = run_driver([str(go_driver("franzgo")), "-brokers", bs, "-topic", topic, "-out", out, "-group", group,
                    "-n", str(N), "-eos-protocol", eos_protocol], tmp_path, "franzgo", broker)
    assert s["partitions"] == {topic: PARTS, out: PARTS}
    assert s["brokers"] == len(broker.node_ids)
    produced = check_group_data(s, bs, topic, group, "franz-go", "_classic")
    check_consumed(recs(s["consumed_consumer"]), produced)
    check_committed(s["committed_consumer"], produced)
    assert s["describe_classic"] == {"state": "Stable", "protocol_type": "consumer",
                                     "protocol": "cooperative-sticky", "members": 1}
    assert s["describe_consumer"]["state"] == "Stable"
    assert s["describe_consumer"]["members"] == 1 and s["describe_consumer"]["assigned"] == PARTS
    check_outside(bs, topic, f"{group}-classic", produced, "CLASSIC")
    check_outside(bs, topic, f"{group}-consumer", produced, "CONSUMER")
    check_outside(bs, topic, f"{group}-eos", produced, eos_protocol.upper())

    # exactly once: every input record copied once, in its partition's order; nothing aborted visible
    assert s["eos_copied"] == N
    check_committed(s["committed_eos"], produced)
    got = recs(s["txn_consumed"])
    assert not [v for _, _, v in got if v.startswith("aborted")], "aborted records read with read_committed"
    assert sorted(v for _, _, v in got) == sorted([f"eos-{v}" for _, _, v in produced] +
                                                  [f"tail-{p}" for p in range(PARTS)])
    for part in range(PARTS):
        copied = [v for p, _, v in got if p == part and v.startswith("eos-")]
        source = [f"eos-{v}" for p, _, v in sorted(produced, key=lambda r: r[1]) if p == part]
        assert copied == source, f"partition {part}: the copy is not in the input's order"
        assert [v for p, _, v in got if p == part][-1] == f"tail-{part}"


def test_sarama(shoal_bs: tuple[str, ShoalProcess], go_driver: Any, tmp_path: Path) -> None:
    """IBM/sarama v1.61.1 (protocol version 4.0): ClusterAdmin, idempotent SyncProducer, a consumer group
    committing synchronously, transactions (with offsets committed through them) and a read_committed
    group."""
    bs, broker = shoal_bs
    topic, tx, group = names("sarama")
    s = run_driver([str(go_driver("sarama")), "-brokers", bs, "-topic", topic, "-txtopic", tx, "-group", group,
                    "-n", str(N)], tmp_path, "sarama", broker)
    assert s["partitions"] == {topic: PARTS, tx: 1}
    produced = check_group_data(s, bs, topic, group, "sarama")
    check_outside(bs, topic, group, produced, "CLASSIC")
    assert s["txn_committed"] == TXN_COMMITTED
    assert s["txn_consumed"] == TXN_COMMITTED
    # the committed transaction's offsets (AddOffsetsToTxn + TxnOffsetCommit) count, the aborted one's do not
    assert {int(p): o for p, o in s["txn_offsets"].items()} == {0: 2, 1: -1, 2: -1}


def test_kafka_go(shoal_bs: tuple[str, ShoalProcess], go_driver: Any, tmp_path: Path) -> None:
    """segmentio/kafka-go v0.4.51 (no idempotent or transactional producer): CreateTopics/Metadata, a
    Writer with acks=all, a group Reader committing each record, OffsetFetch; and a read_committed
    group Reader over transactions written by confluent-kafka.

    kafka-go's Reader sends the isolation level but filters nothing itself: it drops the fetch response's
    aborted-transaction list and returns control batches as records (segmentio/kafka-go#1332, open). So
    its read_committed read is checked for what a broker decides: the whole log in offset order, with a
    COMMIT, an ABORT and a COMMIT marker (control key version 0, type 1/0/1) where each transaction ended.
    """
    bs, broker = shoal_bs
    topic, tx, group = names("kafkago")
    write_transactions(bs, tx)
    log = [f"c1-{i}" for i in range(4)] + ["COMMIT"] + [f"a1-{i}" for i in range(3)] + ["ABORT"] + \
        [f"c2-{i}" for i in range(3)] + ["COMMIT"]
    s = run_driver([str(go_driver("kafkago")), "-brokers", bs, "-topic", topic, "-group", group,
                    "-n", str(N), "-txtopic", tx, "-txwant", str(len(log))], tmp_path, "kafkago", broker)
    assert s["brokers"] == len(broker.node_ids)
    produced = check_group_data(s, bs, topic, group, "kafka-go", idempotent=False)
    check_outside(bs, topic, group, produced, "CLASSIC")
    markers = {"00000001": "COMMIT", "00000000": "ABORT"}
    got = s["txn_consumed"]
    assert [r["o"] for r in got] == list(range(len(log)))
    assert [markers.get(r["k"], "?") if r["v"].startswith("\0") else r["v"] for r in got] == log


def js_summary(client: str, node_modules: Any, bs: str, broker: ShoalProcess, tmp_path: Path,
               topic: str, tx: str, group: str) -> dict[str, Any]:
    env = {**os.environ, "NODE_PATH": str(node_modules(client)), "KAFKAJS_NO_PARTITIONER_WARNING": "1"}
    return run_driver([NODE, str(CLIENTS / client / "driver.js"), bs, topic, tx, group, str(N)], tmp_path, client,
                      broker, env=env)


def test_kafkajs(shoal_bs: tuple[str, ShoalProcess], node_modules: Any, tmp_path: Path) -> None:
    """KafkaJS 2.2.4: admin createTopics/fetchTopicMetadata/fetchOffsets, an idempotent producer, a consumer
    group committing each record, transactions (with offsets committed through them) read back with a
    read_committed group."""
    bs, broker = shoal_bs
    topic, tx, group = names("kafkajs")
    s = js_summary("kafkajs", node_modules, bs, broker, tmp_path, topic, tx, group)
    assert s["version"] == "2.2.4"
    assert s["partitions"] == {topic: PARTS, tx: 1}
    produced = check_group_data(s, bs, topic, group, "kafkajs")
    check_outside(bs, topic, group, produced, "CLASSIC")
    assert s["txn_committed"] == TXN_COMMITTED
    assert s["txn_consumed"] == TXN_COMMITTED
    # the committed transaction's offsets count, the aborted one's do not
    assert {int(p): o for p, o in s["txn_offsets"].items()} == {0: 2, 1: -1, 2: -1}


def test_confluent_kafka_javascript(shoal_bs: tuple[str, ShoalProcess], node_modules: Any,
                                    tmp_path: Path) -> None:
    """@confluentinc/kafka-javascript 1.10.1 (librdkafka 2.15.1, built from source), its KafkaJS-compatible
    API: admin, an idempotent producer, a classic and a KIP-848 (group.protocol=consumer) group committing
    each record, transactions read back with a read_committed group."""
    bs, broker = shoal_bs
    topic, tx, group = names("confluentjs")
    s = js_summary("confluent-js", node_modules, bs, broker, tmp_path, topic, tx, group)
    assert s["version"] == "1.10.1"
    assert s["partitions"] == {topic: PARTS, tx: 1}
    produced = check_group_data(s, bs, topic, group, "confluent-js")
    check_outside(bs, topic, group, produced, "CLASSIC")
    check_consumed(recs(s["consumed_consumer"]), produced)
    check_committed(s["committed_consumer"], produced)
    check_outside(bs, topic, f"{group}-848", produced, "CONSUMER")
    assert s["txn_committed"] == TXN_COMMITTED
    assert s["txn_consumed"] == TXN_COMMITTED
