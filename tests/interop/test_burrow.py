"""Burrow (Debian's `burrow` 1.2, a Go lag monitor on sarama) reports a group's lag from shoal.

Burrow reads the groups' commits from `__consumer_offsets` (Fetch, in Kafka's record formats)
and the partitions' end offsets with ListOffsets v0, which Kafka 4.0 removed; it keeps its own
state in a ZooKeeper (Debian's `zookeeper`), started here for it. Both are installed by
scripts/test.sh.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.ports import free_port

BURROW = "/usr/bin/Burrow"
ZK_SERVER = "/usr/share/zookeeper/bin/zkServer.sh"


def wait_zookeeper(port: int, timeout: float) -> None:
    """Until ZooKeeper serves (its `srvr` answer names a mode): a listening port is not enough, and
    Burrow gives up on a ZooKeeper that drops its first session ("Authentication failed: EOF")."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"srvr")
                answer = b"".join(iter(lambda: s.recv(4096), b""))
            if b"Mode:" in answer:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"ZooKeeper on {port} does not serve after {timeout} s")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def test_burrow_reports_a_groups_lag(shoal, tmp_path: Path):
    assert Path(BURROW).exists() and Path(ZK_SERVER).exists(), "scripts/test.sh installs burrow and zookeeper"
    bs = shoal.bootstrap
    p = KafkaProducer(bootstrap_servers=bs)
    for i in range(100):
        p.send("lagtopic", value=b"%d" % i, partition=0)
    p.flush()
    p.close()
    c = KafkaConsumer("lagtopic", bootstrap_servers=bs, group_id="lagging", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=5000)
    for n, _ in enumerate(c, 1):
        if n == 60:
            break
    c.commit()
    assert c.committed(TopicPartition("lagtopic", 0)) == 60
    c.close()

    zk_port, http_port = free_port(), free_port()
    (tmp_path / "zkdata").mkdir()
    (tmp_path / "zoo.cfg").write_text(f"tickTime=2000\ndataDir={tmp_path / 'zkdata'}\nclientPort={zk_port}\n"
                                      "admin.enableServer=false\n4lw.commands.whitelist=srvr\n")
    zk = subprocess.Popen([ZK_SERVER, "start-foreground", str(tmp_path / "zoo.cfg")],
                          stdout=open(tmp_path / "zk.log", "w"), stderr=subprocess.STDOUT,  # noqa: SIM115
                          env={"ZOO_LOG_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"})
    burrow = None
    try:
        wait_zookeeper(zk_port, 60)
        (tmp_path / "burrow.toml").write_text(f"""
[general]
pidfile="{tmp_path / 'burrow.pid'}"
[logging]
filename="{tmp_path / 'burrow.log'}"
level="info"
[zookeeper]
servers=["127.0.0.1:{zk_port}"]
timeout=6
root-path="/burrow"
[client-profile.shoal]
client-id="burrow"
kafka-version="0.10.0"
[cluster.local]
class-name="kafka"
servers=["{bs}"]
client-profile="shoal"
topic-refresh=10
offset-refresh=2
[consumer.local]
class-name="kafka"
cluster="local"
servers=["{bs}"]
client-profile="shoal"
start-latest=false
[httpserver.default]
address="127.0.0.1:{http_port}"
[storage.default]
class-name="inmemory"
workers=4
intervals=10
expire-group=604800
min-distance=1
""")
        burrow = subprocess.Popen([BURROW, "--config-dir", str(tmp_path)], stdout=open(tmp_path / "burrow.out", "w"),  # noqa: SIM115
                                  stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{http_port}/v3/kafka/local/consumer/lagging/lag"
        status = None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            time.sleep(1)
            try:
                status = json.load(urllib.request.urlopen(url, timeout=5))["status"]
            except OSError:  # not up yet, or the group not seen yet (404)
                continue
            if status["partitions"] and status["partitions"][0]["end"]["offset"] == 60:
                break
        assert status is not None, (tmp_path / "burrow.out").read_text()[-3000:]
        [part] = status["partitions"]
        assert (part["topic"], part["partition"]) == ("lagtopic", 0)
        assert part["end"]["offset"] == 60 and part["current_lag"] == 40
    finally:
        if burrow is not None:
            stop(burrow)
        stop(zk)
