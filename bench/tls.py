"""What TLS costs: produce and consume over a PLAINTEXT and an SSL listener of the same broker,
shoal and Apache Kafka side by side, with the same client (confluent-kafka) and workload.

    .venv/bin/python bench/tls.py [--records 200000] [--repeat 3] [--kafka-line 4]

Each broker runs one node with both listeners; the SSL listener uses PEM stores made for the run
(shoal.testing.tls_certs: an EC P-256 certificate, TLS 1.3). Printed: produce (acks=1) and consume
MB/s per listener (medians of --repeat, after one uncounted warm-up run) and the TLS cost,
1 - SSL/PLAINTEXT (goal, issue 19: at most 30 %), for each broker, and the broker process's CPU
seconds per GB produced on each listener (the client shares the 2 cores, so throughput alone also
measures the client's encryption). Never asserted.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from shoal.testing.tls_certs import Pki, make_pki  # noqa: E402
from tests.reference.apache_kafka import KafkaCluster, fetch  # noqa: E402

PARTITIONS = 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _produce(conf: dict, topic: str, n: int, value: bytes) -> float:
    p = Producer({**conf, "acks": "1", "linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
                  "queue.buffering.max.kbytes": 2_000_000})
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                p.produce(topic, value, partition=i % PARTITIONS)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(180):
        raise RuntimeError("records not delivered")
    return time.perf_counter() - t0


def _consume(conf: dict, topic: str, n: int) -> float:
    c = Consumer({**conf, "group.id": "bench-tls", "enable.auto.commit": False, "fetch.max.bytes": 52428800})
    c.list_topics(topic, timeout=10)
    t0 = time.perf_counter()
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    while got < n:
        for m in c.consume(min(10000, n - got), 1.0):
            if m.error() is not None:
                raise RuntimeError(m.error())
            got += 1
        if time.perf_counter() - t0 > 300:
            raise RuntimeError(f"consumed only {got}/{n}")
    elapsed = time.perf_counter() - t0
    c.close()
    return elapsed


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(plain: str, tls: str, pki: Pki, args: argparse.Namespace, pid: int) -> dict[str, float]:
    confs = {"plaintext": {"bootstrap.servers": plain},
             "ssl": {"bootstrap.servers": tls, "security.protocol": "SSL", "ssl.ca.location": str(pki.ca_cert)}}
    topics = [f"tls-{name}-{r}" for name in confs for r in range(args.repeat)] + ["tls-warmup"]
    admin = AdminClient(confs["plaintext"])
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics]).values():
        f.result(30)
    value = b"v" * 1024
    mb = args.records * 1024 / 1e6
    _produce(confs["ssl"], "tls-warmup", args.records // 2, value)  # the JIT and TLS sessions warm up
    out: dict[str, float] = {}
    for name, conf in confs.items():
        cpu0 = _cpu_seconds(pid)
        out[f"{name}_produce"] = statistics.median(mb / _produce(conf, f"tls-{name}-{r}", args.records, value)
                                                   for r in range(args.repeat))
        # the broker's own CPU per GB received: steadier than throughput on a machine the client shares
        out[f"{name}_cpu_per_gb"] = (_cpu_seconds(pid) - cpu0) / (args.repeat * mb / 1000)
        out[f"{name}_consume"] = statistics.median(mb / _consume(conf, f"tls-{name}-{r}", args.records)
                                                   for r in range(args.repeat))
    return out


def run_shoal(tmp: Path, pki: Pki, args: argparse.Namespace) -> dict[str, float]:
    plain, tls = _free_port(), _free_port()
    props = {"listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls}", "log.dirs": str(tmp / "shoal"),
             **pki.broker_properties("SSL")}
    proc = subprocess.Popen([sys.executable, "-m", "shoal.cli", "--log-level", "WARNING", "serve",
                             *(a for k, v in props.items() for a in ("--override", f"{k}={v}"))],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("shoal started"):
            raise RuntimeError(f"shoal did not start: {line}")
        return measure(f"127.0.0.1:{plain}", f"127.0.0.1:{tls}", pki, args, proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)


def run_kafka(tmp: Path, pki: Pki, args: argparse.Namespace) -> tuple[str, dict[str, float]]:
    fetch(args.kafka_line)
    overrides = {f"listener.name.ssl.{k.split('listener.name.ssl.', 1)[1]}": v
                 for k, v in pki.broker_properties("SSL").items()}
    cluster = KafkaCluster(args.kafka_line, 1, tmp / "kafka", overrides=overrides, extra_listeners={"SSL": "SSL"})
    cluster.start()
    try:
        return cluster.version, measure(cluster.bootstrap_servers, cluster.bootstrap("SSL"), pki, args,
                                        cluster._procs[1].pid)
    finally:
        cluster.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--kafka-line", default="4")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as d:
        tmp = Path(d)
        pki = make_pki(tmp / "pki")
        results = {"shoal": run_shoal(tmp, pki, args)}
        version, results[f"kafka {version}"] = run_kafka(tmp, pki, args)
    print(f"{args.records:,} records of 1 KiB, 4 partitions, acks=1, medians of {args.repeat}")
    print(f"{'':18}{'produce MB/s':>28}{'consume MB/s':>28}{'broker CPU s/GB produced':>28}")
    print(f"{'':18}" + f"{'plain':>9}{'TLS':>9}{'cost':>10}" * 3)
    for name, r in results.items():
        cost = {k: r[f"ssl_{k}"] / r[f"plaintext_{k}"] for k in ("produce", "consume", "cpu_per_gb")}
        print(f"{name:18}{r['plaintext_produce']:9.1f}{r['ssl_produce']:9.1f}{1 - cost['produce']:10.0%}"
              f"{r['plaintext_consume']:9.1f}{r['ssl_consume']:9.1f}{1 - cost['consume']:10.0%}"
              f"{r['plaintext_cpu_per_gb']:9.2f}{r['ssl_cpu_per_gb']:9.2f}{cost['cpu_per_gb'] - 1:+10.0%}")


if __name__ == "__main__":
    main()
