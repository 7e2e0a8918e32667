"""The harness of the sink's exactly-once tests (test_exactly_once*.py): a streaming
consume-transform-produce job (tests/spark/eos_job.py) run until done while input keeps arriving,
SIGKILLed and restarted from its checkpoint at chosen points, then its output read back."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import Producer

from tests.interop.txn_helpers import create_topic, read_all

ROOT = Path(__file__).resolve().parents[2]
TOTAL = 4000
FAULTS = {"kill-mid", "kill-between-tasks", "worker-crash", "kill-between-batches"}


def feed(bs: str, done: threading.Event) -> None:
    """Input keeps arriving while the job runs and dies: 4,000 records over ~20 s."""
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for i in range(TOTAL):
        p.produce("eos-in", key=b"%d" % i, value=b"%d" % i, partition=i % 2)
        if i % 200 == 199:
            p.flush(10)
            time.sleep(1)
    p.flush(30)
    done.set()


def input_consumed(bs: str) -> bool:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": "eos-job"})
    try:
        got = c.committed([TopicPartition("eos-in", p) for p in range(2)], timeout=10)
        return sum(max(tp.offset, 0) for tp in got) == TOTAL
    finally:
        c.close()


def run_until_done(bs: str, tmp: Path, guarantee: str, faults: set[str]) -> tuple[int, set[str]]:
    ckpt, state = tmp / "ckpt", tmp / "faults"
    state.mkdir()
    for name in FAULTS - faults:  # marked as fired already, so they do not fire
        (state / name).touch()
    done = threading.Event()
    threading.Thread(target=feed, args=(bs, done), daemon=True).start()
    runs = 0
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        runs += 1
        with open(tmp / f"job-{runs}.log", "w") as log:
            job = subprocess.Popen([sys.executable, "-m", "tests.spark.eos_job", bs, str(ckpt), guarantee, str(state)],
                                   cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                rc = job.wait(300)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, 9)
                raise
        fired = set(os.listdir(state)) & faults
        if rc == 0 and done.is_set() and fired == faults and input_consumed(bs):
            return runs, fired
        if rc not in (0, -9):
            raise AssertionError(f"job run {runs} failed (exit {rc}); see {tmp / f'job-{runs}.log'}")
    raise AssertionError(f"the job did not finish in time ({runs} runs, faults fired: {sorted(os.listdir(state))})")


def copy_and_check(bs: str, tmp: Path, guarantee: str) -> None:
    create_topic(bs, "eos-in", 2)
    create_topic(bs, "eos-out", 2)
    # The at-least-once control needs one fault that surely duplicates: a kill after one task of a batch
    # has written its records and before the batch's offsets are committed.
    faults = FAULTS if guarantee == "exactly_once" else {"kill-between-tasks"}
    runs, fired = run_until_done(bs, tmp, guarantee, faults)
    assert fired == faults and runs >= len(faults - {"worker-crash"}) + 1  # each kill, then a clean run
    out = Counter(read_all(bs, "eos-out", 2, timeout=60))
    expected = {b"out-%d" % i for i in range(TOTAL)}
    assert set(out) == expected, f"missing {len(expected - set(out))}, unexpected {len(set(out) - expected)}"
    duplicated = {v: n for v, n in out.items() if n > 1}
    if guarantee == "exactly_once":
        assert not duplicated, f"{len(duplicated)} inputs written more than once"
    else:
        assert duplicated, "the faults caused no duplicate: the at-least-once run proves nothing"


