"""Kafka Connect 4.3 on shoal (issue 17, part 5): a distributed worker (its config, offset and status
topics, compacted, and the `connect` group protocol) runs FileStreamSource from a file to a topic and
FileStreamSink from the topic to a file; the worker is restarted mid-stream, and the sink file must
then equal the source file.

connect-file is not published for 4.4.0 on Maven Central, and its 4.3.1 jar does not load in a 4.4
runtime (it uses a kafka-clients class that 4.4 moved), so the whole Connect stack is 4.3.1, the newest
release with its FileStream connectors.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.ports import free_port
from tests.reference import maven
from tests.reference.apache_kafka import _die_with_parent
from tests.reference.consumer_protocol_helpers import wait_until

pytestmark = [pytest.mark.reference, pytest.mark.timeout(300)]

LINES = 3000


@pytest.fixture(scope="module")
def connect_lib() -> Path:
    return maven.resolve("connect-4.3.1", [("org.apache.kafka", "connect-runtime", "4.3.1"),
                                           ("org.apache.kafka", "connect-file", "4.3.1"),
                                           ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.25.5")])


class Worker:
    """A ConnectDistributed process and its REST address."""

    def __init__(self, lib: Path, bs: str, port: int, work: Path) -> None:
        props = work / "worker.properties"
        props.write_text("\n".join([
            f"bootstrap.servers={bs}", "group.id=shoal-connect",
            "key.converter=org.apache.kafka.connect.storage.StringConverter",
            "value.converter=org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic=connect-configs", "offset.storage.topic=connect-offsets",
            "status.storage.topic=connect-status", "config.storage.replication.factor=1",
            "offset.storage.replication.factor=1", "status.storage.replication.factor=1",
            "offset.flush.interval.ms=500", f"listeners=http://127.0.0.1:{port}",
            "plugin.discovery=only_scan", ""]))
        self.url = f"http://127.0.0.1:{port}"
        with open(work / "worker.log", "ab") as log:
            self.proc = subprocess.Popen(
                ["java", "-Xmx384m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", f"{lib}/*",
                 "org.apache.kafka.connect.cli.ConnectDistributed", str(props)],
                stdout=log, stderr=log, preexec_fn=_die_with_parent)

    def rest(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
        return json.loads(raw) if raw else None

    def up(self) -> bool:
        try:
            return bool(self.rest("GET", "/connectors") is not None)
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            return False

    def running(self, name: str) -> bool:
        try:
            status = self.rest("GET", f"/connectors/{name}/status")
        except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
            return False
        return status["connector"]["state"] == "RUNNING" and [t["state"] for t in status["tasks"]] == ["RUNNING"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # a clean stop: the worker commits its offsets and leaves the group
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def append(path: Path, lines: list[str]) -> None:
    with open(path, "a") as f:
        f.writelines(line + "\n" for line in lines)


def test_file_source_to_topic_to_file_sink_through_a_worker_restart(shoal_brokers: Any, connect_lib: Path,
                                                                      tmp_path: Path) -> None:
    bs = shoal_brokers().bootstrap_servers
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    source.write_text("")
    lines = [f"line {i:05d} of the source" for i in range(LINES)]
    port = free_port()
    workers: list[Worker] = []
    try:
        workers.append(Worker(connect_lib, bs, port, tmp_path))
        wait_until(lambda: workers[-1].up(), 120, "the Connect worker's REST API",
                   lambda: (tmp_path / "worker.log").read_text()[-2000:])
        w = workers[-1]
        w.rest("POST", "/connectors", {"name": "file-source", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1",
            "file": str(source), "topic": "connect-data"}})
        w.rest("POST", "/connectors", {"name": "file-sink", "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": "1",
            "file": str(sink), "topics": "connect-data"}})
        wait_until(lambda: w.running("file-source") and w.running("file-sink"), 60, "both connectors running",
                   lambda: (tmp_path / "worker.log").read_text()[-2000:])
        append(source, lines[:LINES // 3])
        wait_until(lambda: sink.exists() and len(sink.read_text().splitlines()) >= LINES // 3, 60,
                   "the first third in the sink file")
        append(source, lines[LINES // 3: 2 * LINES // 3])
        time.sleep(0.3)  # mid-stream
        w.stop()
        append(source, lines[2 * LINES // 3:])  # written while no worker runs
        workers.append(Worker(connect_lib, bs, port, tmp_path))
        wait_until(lambda: sink.exists() and len(sink.read_text().splitlines()) >= LINES, 120,
                   "every line in the sink file after the restart",
                   lambda: f"{len(sink.read_text().splitlines())} lines; "
                           + (tmp_path / "worker.log").read_text()[-1500:])
        time.sleep(1.5)  # a duplicate would show by now
        topics = {t["name"]: t for t in _describe_topics(bs, ["connect-configs", "connect-offsets", "connect-status"])}
    finally:
        for worker in workers:
            worker.stop()
    assert sink.read_text() == source.read_text()
    for name, topic in topics.items():
        assert topic["cleanup.policy"] == "compact", (name, topic)


def _describe_topics(bs: str, names: list[str]) -> list[dict[str, str]]:
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bs})
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    out = []
    for resource, fut in admin.describe_configs(resources).items():
        configs = fut.result(15)
        out.append({"name": resource.name, "cleanup.policy": configs["cleanup.policy"].value})
    return out
