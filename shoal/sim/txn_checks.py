"""Invariants of transactions and read_committed reads.

- ``lso-bounded``: a read_committed fetch's last stable offset is never above its high watermark.
- ``lso-open-txn``: a read_committed fetch returns no batch of a transaction still open in the
  partition (judged against the log's own producer state when the answer leaves the node).
- ``read-committed-aborted`` / ``read-committed-open``: what a read_committed reader delivered
  (after filtering aborted transactions as Kafka's consumer does) was, by the end of the run,
  committed: not aborted, not left open.
- ``txn-atomic``: a transaction whose EndTxn(commit) was acknowledged has every record it wrote
  committed; one whose abort was acknowledged has none; any other has all or none. Not judged: a
  transaction that a late copy of an earlier transaction's EndTxn ended. The simulated producer speaks
  transaction version 1 (EndTxn v3), whose epoch stays the same from one transaction to the next, so
  the coordinator cannot tell such a copy from the current transaction's EndTxn: Kafka's coordinator
  ends the open transaction too (transaction version 2, KIP-890 part 2, bumps the epoch at every
  EndTxn to close that hole; shoal does not implement it).
- ``epoch-fence``: as in `invariants`, over the transactional topic (markers included).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shoal.protocol import record_batch as rb
from shoal.protocol.generated.api_keys import ApiKey
from shoal.sim.invariants import EpochOrder, log_batches

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.sim.trace import Trace

TxnKey = tuple[str, int, int]  # producer, epoch, transaction number


@dataclass
class TxnChecker:
    trace: Trace
    topic: str
    broker: Broker | None = None
    written_by: dict[TxnKey, list[bytes]] = field(default_factory=dict)
    outcome: dict[TxnKey, bool] = field(default_factory=dict)  # acknowledged EndTxn: commit?
    seen: dict[bytes, tuple[tuple[str, int], int, str]] = field(default_factory=dict)
    committed_txns: int = 0
    current: dict[str, TxnKey] = field(default_factory=dict)  # producer -> its newest transaction
    ending: dict[int, tuple[Any, TxnKey]] = field(default_factory=dict)  # id(EndTxn request) -> it, its txn
    ended_late: set[TxnKey] = field(default_factory=set)  # ended by an earlier transaction's EndTxn

    def fail(self, invariant: str, detail: str) -> None:
        self.trace.violation(invariant, detail)

    # ------------------------------------------------------------------ from the clients
    def began(self, key: TxnKey) -> None:
        """Transaction ``key`` is about to add its partitions: from now on it is the producer's open one
        (a late EndTxn landing before its first record is acknowledged ends it; seed 61278)."""
        self.current[key[0]] = key

    def written(self, key: TxnKey, value: bytes) -> None:
        self.written_by.setdefault(key, []).append(value)
        self.current[key[0]] = key

    def end_sent(self, key: TxnKey, request: Any) -> None:
        """The EndTxn request of transaction ``key`` (the same object for every copy and retry)."""
        self.ending[id(request)] = (request, key)
        self.current[key[0]] = key

    def ended(self, key: TxnKey, commit: bool) -> None:
        self.outcome[key] = commit
        self.committed_txns += commit

    def delivered(self, tp: tuple[str, int], offset: int, value: bytes, who: str) -> None:
        self.seen.setdefault(value, (tp, offset, who))

    # ------------------------------------------------------------------ from the network
    def observe(self, node_id: int, token: int, api_key: int, version: int, request: Any, response: Any,
                phase: str) -> None:
        if api_key == ApiKey.END_TXN and phase == "end" and response is not None and response.error_code == 0:
            self._end_txn_answered(request)
        if api_key != ApiKey.FETCH or phase != "end" or response is None or request.isolation_level != 1:
            return
        for t in response.responses:
            if t.topic != self.topic:
                continue
            for p in t.partitions:
                if p.error_code == 0:
                    self._fetched((t.topic, p.partition_index), p)

    def _end_txn_answered(self, request: Any) -> None:
        entry = self.ending.get(id(request))
        if entry is None:
            return
        key = entry[1]
        now = self.current.get(key[0], key)
        if now != key and now not in self.ended_late:
            self.ended_late.add(now)
            self.trace.emit(f"a late EndTxn of {key} ended {now} (transaction version 1): its atomicity is not judged")

    def _fetched(self, tp: tuple[str, int], part: Any) -> None:
        if part.last_stable_offset > part.high_watermark:
            self.fail("lso-bounded", f"{tp}: last stable offset {part.last_stable_offset} above high watermark "
                                     f"{part.high_watermark}")
        plog = self.broker.logs.get(*tp) if self.broker is not None else None
        first_open = plog.producer_state.first_unstable_offset() if plog is not None else None
        if first_open is None or not part.records:
            return
        for h in rb.iter_batches(part.records):
            if h.is_transactional and not h.is_control and h.base_offset >= first_open:
                self.fail("lso-open-txn", f"{tp}: read_committed fetch returned offset {h.base_offset} of an open "
                                          f"transaction (first open offset {first_open}, answered LSO "
                                          f"{part.last_stable_offset})")
                return

    # ------------------------------------------------------------------ the end
    def final_check(self, broker: Broker, partitions: int) -> None:
        status: dict[bytes, str] = {}
        for p in range(partitions):
            self._scan(f"{self.topic}-{p}", broker.partition_log(self.topic, p), status)
        for value, (tp, offset, who) in self.seen.items():
            state = status.get(value, "missing")
            if state == "aborted":
                self.fail("read-committed-aborted", f"{who} delivered {value!r} ({tp}@{offset}) of an aborted txn")
            elif state != "committed":
                self.fail("read-committed-open", f"{who} delivered {value!r} ({tp}@{offset}), which is {state}")
        for key, values in self.written_by.items():
            if key in self.ended_late:
                continue
            states = {status.get(v, "missing") for v in values}
            commit = self.outcome.get(key)
            if commit is True and states != {"committed"}:
                self.fail("txn-atomic", f"{key} commit acknowledged, its records are {sorted(states)}")
            elif commit is False and "committed" in states:
                self.fail("txn-atomic", f"{key} abort acknowledged, yet records are committed")
            elif commit is None and "committed" in states and len(states) > 1:
                self.fail("txn-atomic", f"{key} partly committed: {sorted(states)}")

    def _scan(self, where: str, plog: Any, status: dict[bytes, str]) -> None:
        open_values: dict[int, list[bytes]] = {}
        epochs = EpochOrder(where)
        for buf, h in log_batches(plog, plog.log_end_offset):
            if (wrong := epochs.went_back(h)) is not None:
                self.fail("epoch-fence", wrong)
            if h.is_control:
                verdict = "committed" if rb.control_type(buf, h) == rb.CONTROL_COMMIT else "aborted"
                for v in open_values.pop(h.producer_id, []):
                    status[v] = verdict
            else:
                values = [bytes(r.value or b"") for r in rb.iter_records(buf, h)]
                if h.is_transactional:
                    open_values.setdefault(h.producer_id, []).extend(values)
                else:
                    status.update(dict.fromkeys(values, "committed"))
        for values in open_values.values():
            status.update(dict.fromkeys(values, "open"))
