"""kcat (librdkafka's CLI): -L metadata, -P produce, -C consume, every codec."""

from __future__ import annotations

import json

import pytest

from tests.interop.dataset import CODECS
from tests.interop.kcat_helpers import kcat


def test_kcat_metadata_lists_brokers_and_topics(shoal_cluster):
    kcat("-b", shoal_cluster.bootstrap, "-P", "-t", "meta-topic", "-p", "0", input="x\n")
    listing = json.loads(kcat("-b", shoal_cluster.bootstrap, "-L", "-J"))
    assert sorted(b["id"] for b in listing["brokers"]) == sorted(shoal_cluster.ports)
    assert {b["name"] for b in listing["brokers"]} == {f"127.0.0.1:{p}" for p in shoal_cluster.ports.values()}
    topics = {t["topic"]: t for t in listing["topics"]}
    assert "meta-topic" in topics
    assert topics["meta-topic"]["partitions"][0]["leader"] in shoal_cluster.ports


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_consume(shoal_cluster, codec):
    bs, topic = shoal_cluster.bootstrap, f"kcat-{codec}"
    lines = [f"k{i}:value number {i} " + "x" * (i * 37 % 500) for i in range(200)]
    kcat("-b", bs, "-P", "-t", topic, "-p", "0", "-K:", "-z", codec, "-H", "origin=kcat",
         input="\n".join(lines) + "\n")
    out = kcat("-b", bs, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-J")
    msgs = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert [f"{m['key']}:{m['payload']}" for m in msgs] == lines
    assert [m["offset"] for m in msgs] == list(range(200))
    assert all(m["headers"] == ["origin", "kcat"] for m in msgs)
