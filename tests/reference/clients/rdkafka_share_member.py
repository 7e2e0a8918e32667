"""A share group member (KIP-932) on librdkafka (confluent-kafka's ``ShareConsumer``) for shoal's reference
tests; the counterpart of ShareMember.java.

Usage: python rdkafka_share_member.py <bootstrap> <group> <topic> [key=value ...]
(librdkafka settings: share.acknowledgement.mode=implicit|explicit, max.poll.records, ...; sleep.ms=N is a
pause after each record). The acknowledgement mode may also come from $SHARE_ACK_MODE.

Prints one JSON object per line on stdout, as ShareMember.java does: start, rec (partition, offset, value,
``dc`` = ``Message.delivery_count()``), holding, acked, committed / commit_failed, error, closed. In explicit
mode each record is acknowledged as its value says ("release-N" RELEASE on its first delivery then ACCEPT,
"reject-N" REJECT, "poison-N" RELEASE every time, "hold-N" never on its first delivery: the member waits to
be killed) and then ``commit_sync()``. Exits cleanly (``close()``) when its standard input closes or on SIGTERM.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

_out = threading.Lock()


def emit(**event: object) -> None:
    with _out:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


def instruction(value: str, dc: int | None) -> AcknowledgeType:
    if value.startswith("release-"):
        return AcknowledgeType.RELEASE if (dc or 1) <= 1 else AcknowledgeType.ACCEPT
    if value.startswith("reject-"):
        return AcknowledgeType.REJECT
    if value.startswith("poison-"):
        return AcknowledgeType.RELEASE
    return AcknowledgeType.ACCEPT


def delivery_count(m: object) -> int | None:
    try:
        dc = m.delivery_count()  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        return None
    return None if dc is None or dc < 0 else int(dc)


def main() -> None:
    bootstrap, group, topic, *extra = sys.argv[1:]
    conf: dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": group}
    if os.environ.get("SHARE_ACK_MODE"):
        conf["share.acknowledgement.mode"] = os.environ["SHARE_ACK_MODE"]
    sleep_s = 0.0
    for kv in extra:
        k, v = kv.split("=", 1)
        if k == "sleep.ms":
            sleep_s = int(v) / 1000
        else:
            conf[k] = v
    explicit = conf.get("share.acknowledgement.mode") == "explicit"
    consumer = ShareConsumer(conf)
    stop = threading.Event()

    def stdin_closed() -> None:
        sys.stdin.read()
        stop.set()

    threading.Thread(target=stdin_closed, daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    emit(ev="start", client="rdkafka", explicit=explicit)
    consumer.subscribe([topic])
    try:
        while not stop.is_set():
            msgs = consumer.poll(0.2)
            good = []
            for m in msgs:
                if m.error():
                    emit(ev="error", err=str(m.error()))
                    continue
                good.append(m)
                emit(ev="rec", p=m.partition(), o=m.offset(), v=(m.value() or b"").decode(), dc=delivery_count(m))
            if not good:
                continue
            for m in good:
                value = (m.value() or b"").decode()
                if value.startswith("hold-") and (delivery_count(m) or 1) <= 1:
                    emit(ev="holding", o=m.offset())
                    while not stop.is_set():
                        time.sleep(0.1)  # never acknowledges: the test kills this member
                    break
                if sleep_s:
                    time.sleep(sleep_s)
                if explicit:
                    kind = instruction(value, delivery_count(m))
                    consumer.acknowledge(m, kind)
                    emit(ev="acked", p=m.partition(), o=m.offset(), type=kind.name)
            if stop.is_set():
                break
            if explicit:
                try:
                    result = consumer.commit_sync(20.0)
                    failed = {f"{tp.partition}": str(err) for tp, err in (result or {}).items() if err is not None}
                    if failed:
                        emit(ev="commit_failed", err=json.dumps(failed))
                    else:
                        emit(ev="committed", n=len(good))
                except KafkaException as e:
                    emit(ev="commit_failed", err=str(e))
    except Exception as e:  # noqa: BLE001 - reported to the test, which decides
        emit(ev="error", err=repr(e))
    finally:
        try:
            consumer.close()
        except Exception as e:  # noqa: BLE001
            emit(ev="error", err=f"close: {e!r}")
        emit(ev="closed")


if __name__ == "__main__":
    main()
