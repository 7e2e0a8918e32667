"""A group member on librdkafka (confluent-kafka, ``group.protocol=consumer``) for shoal's reference tests.

Usage: python rdkafka_member.py <bootstrap> <group> <topic> [key=value ...] (extra librdkafka settings).

Prints one JSON object per line on stdout, as GroupMember.java does: start, assigned/revoked/lost (with
the member's whole assignment after the change), rec, committed (synchronous commit after each batch),
commit_failed, error, closed. Exits cleanly (leaves the group) when its standard input closes or on
SIGTERM.
"""

from __future__ import annotations

import json
import signal
import sys
import threading

from confluent_kafka import Consumer, KafkaException, TopicPartition

_out = threading.Lock()


def emit(**event: object) -> None:
    with _out:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


def main() -> None:
    bootstrap, group, topic, *extra = sys.argv[1:]
    conf: dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                               "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    conf.update(kv.split("=", 1) for kv in extra)
    consumer = Consumer(conf)
    stop = threading.Event()

    def stdin_closed() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=stdin_closed, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    # the assignment as the callbacks changed it: what is reported when librdkafka can no longer say
    mine: set[tuple[str, int]] = set()

    def report(ev: str):
        def callback(c: Consumer, parts: list[TopicPartition]) -> None:
            changed = {(tp.topic, tp.partition) for tp in parts}
            if ev == "assigned":
                c.incremental_assign(parts)
                mine.update(changed)
            else:
                if ev == "revoked":
                    c.incremental_unassign(parts)
                mine.difference_update(changed)
            try:
                now = {(tp.topic, tp.partition) for tp in c.assignment()}
            except KafkaException:
                # the revoke that close() runs can come after the handle began to terminate, and then
                # assignment() fails ("Broker handle destroyed for termination"); an exception left in a
                # callback comes out of close() as a bare KafkaError, which no except clause catches
                if not stop.is_set():
                    raise
                now = set(mine)
            emit(ev=ev, parts=sorted(tp.partition for tp in parts), owned=sorted(p for _, p in now),
                 tps=sorted(f"{t}:{p}" for t, p in now))
        return callback

    emit(ev="start", client="librdkafka")
    # "re:<regex>": a regex the broker resolves (librdkafka subscribes to "^..." names as regexes)
    consumer.subscribe([f"^{topic[3:]}" if topic.startswith("re:") else topic], on_assign=report("assigned"), on_revoke=report("revoked"),
                       on_lost=report("lost"))
    try:
        while not stop.is_set():
            msgs = consumer.consume(num_messages=500, timeout=0.2)
            good = []
            for m in msgs:
                if m.error():
                    emit(ev="error", err=str(m.error()))
                    continue
                good.append(m)
                emit(ev="rec", topic=m.topic(), p=m.partition(), o=m.offset(), v=(m.value() or b"").decode())
            if not good:
                continue
            nxt: dict[int, int] = {}
            for m in good:
                nxt[m.partition()] = m.offset() + 1
            offsets = {str(p): o for p, o in nxt.items()}
            try:
                consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in nxt.items()], asynchronous=False)
                emit(ev="committed", offsets=offsets)
            except KafkaException as e:
                emit(ev="commit_failed", offsets=offsets, err=str(e))
    except Exception as e:  # noqa: BLE001 - reported to the test, which decides
        emit(ev="error", err=repr(e))
    finally:
        try:
            consumer.close()
        except Exception as e:  # noqa: BLE001 - reported to the test, which decides
            emit(ev="close_error", err=str(e))
        emit(ev="closed")


if __name__ == "__main__":
    main()
