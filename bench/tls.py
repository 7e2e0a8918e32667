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
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from produce_fetch import PARTITIONS, consume, free_port, process_cpu_seconds, produce  # noqa: E402

from shoal.testing.tls_certs import Pki, make_pki  # noqa: E402
from tests.reference.apache_kafka import KafkaCluster, fetch  # noqa: E402


def measure(plain: str, tls: str, pki: Pki, args: argparse.Namespace, pid: int) -> dict[str, float]:
    bootstrap = {"plaintext": plain, "ssl": tls}
    confs = {"plaintext": {}, "ssl": {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca_cert)}}
    topics = [f"tls-{name}-{r}" for name in confs for r in range(args.repeat)] + ["tls-warmup"]
    admin = AdminClient({"bootstrap.servers": plain})
    for f in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in topics]).values():
        f.result(30)
    value = b"v" * 1024
    mb = args.records * 1024 / 1e6
    produce(tls, "tls-warmup", args.records // 2, value, "1", confs["ssl"])  # the JIT and TLS sessions warm up
    out: dict[str, float] = {}
    for name, conf in confs.items():
        cpu0 = process_cpu_seconds(pid)
        out[f"{name}_produce"] = statistics.median(
            mb / produce(bootstrap[name], f"tls-{name}-{r}", args.records, value, "1", conf)
            for r in range(args.repeat))
        # the broker's own CPU per GB received: steadier than throughput on a machine the client shares
        out[f"{name}_cpu_per_gb"] = (process_cpu_seconds(pid) - cpu0) / (args.repeat * mb / 1000)
        out[f"{name}_consume"] = statistics.median(mb / consume(bootstrap[name], f"tls-{name}-{r}", args.records, conf)
                                                   for r in range(args.repeat))
    return out


def run_shoal(tmp: Path, pki: Pki, args: argparse.Namespace) -> dict[str, float]:
    plain, tls = free_port(), free_port()
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
