"""The requests of the share consumer (KIP-932): ShareFetch and ShareAcknowledge to partition leaders.

:class:`ShareRequests` is the part of :class:`~shoal.client.share_consumer.AIOShareConsumer` that
talks to leaders: one share session per leader (see :mod:`share_session`), at most one request of
a session in flight, acknowledgements piggybacked on the next ShareFetch when one goes out (as
Java's ShareConsumeRequestManager does) and sent in a ShareAcknowledge otherwise.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from shoal.protocol.errors import ErrorCode, error_name, is_retriable
from shoal.protocol.generated.api_keys import ApiKey

from .cluster import KafkaClient
from .consumer_member import resolve_assignment
from .errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for
from .protocol import request_class
from .share_member import ShareMember
from .share_session import (
    FINAL_EPOCH,
    GAP,
    AcknowledgeType,
    ShareConsumerRecord,
    ShareSession,
    TopicIdPartition,
    acknowledgement_batches,
    acquired_records,
)
from .structs import TopicPartition, by_topic

log = logging.getLogger(__name__)

#: ShareFetch/ShareAcknowledge: v1 is Kafka 4.0's, v2 adds RENEW (KIP-1222).
FETCH_VERSION, RENEW_VERSION = 2, 2
#: Partition errors after which the leader is looked up again.
LEADER_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                 ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR)

Acks = dict[TopicPartition, dict[int, int]]  # partition -> offset -> acknowledge type
AckResults = dict[TopicPartition, Exception | None]
#: ``callback(offsets by partition, error or None)``: how acknowledgements went (Java's AcknowledgementCommitCallback).
AckCallback = Callable[[dict[TopicPartition, set[int]], Exception | None], Any]


class ShareRequests:
    """ShareFetch and ShareAcknowledge for the share consumer, and the state they keep."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.group_id: str = config["group.id"]
        self.client = KafkaClient(config)
        self.member: ShareMember | None = None
        #: The broker's record lock duration, from the last ShareFetch (None before one answered).
        self.acquisition_lock_timeout_ms: int | None = None
        self._sessions: dict[int, ShareSession] = {}
        self._buffer: deque[ShareConsumerRecord] = deque()  # acquired, not yet returned by poll
        self._pending: Acks = {}  # acknowledgements not yet sent
        self._fetches: dict[int, asyncio.Task] = {}
        self._ack_tasks: set[asyncio.Task] = set()
        self._errors: list[BaseException] = []
        self._callback: AckCallback | None = None
        self._needs_metadata = False
        self._wakeup: asyncio.Event | None = None  # set by start(): wakes a waiting poll

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    def _assigned(self) -> dict[TopicPartition, TopicIdPartition]:
        """The member's assignment by name (topic ids metadata does not name yet are left out)."""
        if self.member is None:
            return {}
        _resolved, by_name, unknown = resolve_assignment(self.client.cluster, self.member.assignment)
        if unknown:
            self._needs_metadata = True
        return {tp: (tid, tp.partition) for tp, tid in by_name.items()}

    def _names(self) -> dict[uuid.UUID, str]:
        return {i.topic_id: n for n, i in self.client.cluster.topics.items() if isinstance(i.topic_id, uuid.UUID)}

    def _ids(self) -> dict[str, uuid.UUID]:
        return {n: i.topic_id for n, i in self.client.cluster.topics.items() if isinstance(i.topic_id, uuid.UUID)}

    def _by_leader(self, acks: Acks) -> dict[int, Acks]:
        out: dict[int, Acks] = {}
        for tp, offs in acks.items():
            if offs:
                out.setdefault(self.client.cluster.leader_for(tp.topic, tp.partition), {})[tp] = offs
        return out

    def _fetch_timeout_ms(self) -> int:
        return self.config["request.timeout.ms"] + self.config["fetch.max.wait.ms"]

    def _send_requests(self) -> None:
        """A ShareFetch to each leader of assigned partitions with nothing buffered and nothing in
        flight (carrying that leader's pending acknowledgements); a ShareAcknowledge where
        acknowledgements wait but no fetch goes."""
        wanted: dict[int, set[TopicIdPartition]] = {}
        for tp, tip in self._assigned().items():
            leader = self.client.cluster.leader_for(tp.topic, tp.partition)
            if leader < 0:
                self._needs_metadata = True
            else:
                wanted.setdefault(leader, set()).add(tip)
        buffered = {self.client.cluster.leader_for(r.topic, r.partition) for r in self._buffer}
        loop = asyncio.get_running_loop()
        for node, tips in wanted.items():
            if node not in self._fetches and node not in buffered:
                self._fetches[node] = loop.create_task(self._fetch(node, tips))
        for node, acks in self._by_leader(self._pending).items():
            if node in self._fetches or node < 0:
                continue
            for tp in acks:
                del self._pending[tp]
            self._spawn_ack(self._send_acks(node, acks))

    def _spawn_ack(self, coro: Any) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._ack_tasks.add(task)
        task.add_done_callback(self._ack_tasks.discard)
        return task

    def _session(self, node: int) -> ShareSession:
        s = self._sessions.get(node)
        if s is None:
            s = self._sessions[node] = ShareSession(node)
        return s

    def _ack_topics(self, cls: Any, acks: Acks, extra: Iterable[TopicIdPartition] = (), fetch: bool = False) -> list[Any]:
        """The request's topics: the partitions in ``extra`` and those with acknowledgements."""
        ids = self._ids()
        parts: dict[TopicIdPartition, list[Any]] = {tip: [] for tip in extra}
        batch_cls = cls.AcknowledgementBatch
        for tp, offs in acks.items():
            tid = ids.get(tp.topic)
            if tid is not None:
                parts.setdefault((tid, tp.partition), []).extend(
                    batch_cls(first_offset=f, last_offset=la, acknowledge_types=ts)
                    for f, la, ts in acknowledgement_batches(offs))
        part_cls = cls.FetchPartition if fetch else cls.AcknowledgePartition
        # PartitionMaxBytes is a v0 field only: v1+ share max_bytes across the request.
        topics = by_topic((tip, part_cls(partition_index=tip[1], acknowledgement_batches=batches))
                          for tip, batches in sorted(parts.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])))
        topic_cls = cls.FetchTopic if fetch else cls.AcknowledgeTopic
        return [topic_cls(topic_id=t, partitions=ps) for t, ps in topics.items()]

    async def _fetch(self, node: int, wanted: set[TopicIdPartition]) -> None:
        """One ShareFetch to ``node``: session changes, piggybacked acknowledgements, new records."""
        cfg, session = self.config, self._session(node)
        acks: Acks = {}
        try:
            async with session.lock:
                conn = await self.client.conn(node, purpose="share")
                session.bind(conn)
                version = conn.version_up_to(ApiKey.SHARE_FETCH, FETCH_VERSION)
                if version < 1:
                    self._errors.append(KafkaError(ErrorCode.UNSUPPORTED_VERSION,
                                                   f"broker {node} does not serve ShareFetch v1+ (KIP-932)"))
                    return
                names = self._names()
                epoch = session.epoch
                req = self._build_fetch(session, wanted, acks)
                resp = await conn.send(req, version=version, timeout_ms=self._fetch_timeout_ms())
                session.on_response(epoch, resp.error_code, wanted)
        except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
            log.debug("share fetch from node %s failed: %r", node, e)
            session.reset()
            self._needs_metadata = True
            self._fail_acks(acks, e)
            await asyncio.sleep(cfg["retry.backoff.ms"] / 1000)
            return
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - surfaced to the application by poll
            log.exception("share fetch from node %s failed", node)
            self._errors.append(e)
            return
        finally:
            self._fetches.pop(node, None)
            self._wake()
        self._on_fetch_response(node, resp, acks, names)

    def _build_fetch(self, session: ShareSession, wanted: set[TopicIdPartition], acks: Acks) -> Any:
        """The session's next ShareFetch; the pending acknowledgements it carries move to ``acks``."""
        assert self.member is not None
        cfg, cls = self.config, request_class(ApiKey.SHARE_FETCH)
        if session.open:  # no acknowledgements on epoch 0
            ids = self._ids()
            for tp, offs in list(self._pending.items()):
                # RENEW goes in a ShareAcknowledge flagged is_renew_ack (KIP-1222), never on a fetch.
                if (ids.get(tp.topic), tp.partition) in wanted and AcknowledgeType.RENEW not in offs.values():
                    acks[tp] = self._pending.pop(tp)
        added, forgotten = session.changes(wanted)
        fgt = by_topic((tip, tip[1]) for tip in forgotten)
        # As Java: max.poll.records bounds both the records acquired and the batch size.
        return cls(group_id=self.group_id, member_id=self.member.member_id, share_session_epoch=session.epoch,
                   max_wait_ms=cfg["fetch.max.wait.ms"], min_bytes=cfg["fetch.min.bytes"],
                   max_bytes=cfg["fetch.max.bytes"], max_records=cfg["max.poll.records"],
                   batch_size=cfg["max.poll.records"], topics=self._ack_topics(cls, acks, added, fetch=True),
                   forgotten_topics_data=[cls.ForgottenTopic(topic_id=t, partitions=ps) for t, ps in fgt.items()])

    def _on_fetch_response(self, node: int, resp: Any, acks: Acks, names: dict[uuid.UUID, str]) -> None:
        """Buffer the acquired records, queue GAP acknowledgements, report the piggybacked ones."""
        if resp.error_code:
            self._on_request_error(node, "ShareFetch", resp.error_code, resp.error_message, acks)
            return
        if getattr(resp, "acquisition_lock_timeout_ms", 0):
            self.acquisition_lock_timeout_ms = resp.acquisition_lock_timeout_ms
        results: AckResults = {}
        for t in resp.responses:
            name = names.get(t.topic_id)
            if name is None:
                self._needs_metadata = True
                continue
            for p in t.partitions:
                tp = TopicPartition(name, p.partition_index)
                if tp in acks:
                    results[tp] = error_for(p.acknowledge_error_code, f"acknowledge {tp}") \
                        if p.acknowledge_error_code else None
                if p.error_code:
                    self._on_partition_error(tp, p.error_code)
                    continue
                recs, gaps = acquired_records(tp, p.records, [(a.first_offset, a.last_offset, a.delivery_count)
                                                              for a in p.acquired_records])
                self._buffer.extend(recs)
                for off in gaps:
                    self._pending.setdefault(tp, {})[off] = GAP
        self._report(acks, results)

    def _on_partition_error(self, tp: TopicPartition, code: int) -> None:
        if code in LEADER_ERRORS:
            self._needs_metadata = True
        elif not is_retriable(code):
            self._errors.append(error_for(code, f"share fetch {tp}"))

    def _on_request_error(self, node: int, api: str, code: int, message: str | None, acks: Acks) -> None:
        """A top-level error: the acknowledgements it carried failed; fatal ones reach the application."""
        err = error_for(code, f"{api} to node {node}: {error_name(code)}" + (f": {message}" if message else ""))
        self._fail_acks(acks, err)
        if code in (ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.INVALID_SHARE_SESSION_EPOCH):
            log.info("share session with node %s: %s; opening a new one", node, error_name(code))
        elif code in (ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                      ErrorCode.UNSUPPORTED_VERSION, ErrorCode.INVALID_REQUEST):
            self._errors.append(err)
        else:
            log.info("%s to node %s: %s", api, node, error_name(code))
            self._needs_metadata = True

    async def _send_acks(self, node: int, acks: Acks, *, final: bool = False) -> AckResults:
        """One ShareAcknowledge to ``node`` (``final``: epoch -1, closing the session); per-partition results."""
        assert self.member is not None
        session = self._session(node)
        cls = request_class(ApiKey.SHARE_ACKNOWLEDGE)
        async with session.lock:
            conn = session.conn
            if not session.open or conn is None or conn.closed:
                # The session is gone (the broker released its records), or there never was one.
                session.reset()
                return self._fail_acks(acks, KafkaError(ErrorCode.SHARE_SESSION_NOT_FOUND,
                                                        f"no share session with node {node}"))
            epoch = FINAL_EPOCH if final else session.epoch
            version = conn.version_up_to(ApiKey.SHARE_ACKNOWLEDGE, FETCH_VERSION)
            req = cls(group_id=self.group_id, member_id=self.member.member_id, share_session_epoch=epoch,
                      topics=self._ack_topics(cls, acks))
            if version >= RENEW_VERSION:
                req.is_renew_ack = any(t == AcknowledgeType.RENEW for offs in acks.values() for t in offs.values())
            try:
                resp = await conn.send(req, version=version)
            except (KafkaConnectionError, KafkaTimeoutError, OSError) as e:
                session.reset()
                return self._fail_acks(acks, e)
            session.on_response(epoch, resp.error_code, session.partitions)
        if resp.error_code:
            self._on_request_error(node, "ShareAcknowledge", resp.error_code, resp.error_message, acks)
            err = error_for(resp.error_code, f"ShareAcknowledge to node {node}")
            return {tp: err for tp in acks}
        names = self._names()
        results: AckResults = {tp: None for tp in acks}
        for t in resp.responses:
            for p in t.partitions:
                tp = TopicPartition(names.get(t.topic_id, ""), p.partition_index)
                if tp in results and p.error_code:
                    results[tp] = error_for(p.error_code, f"acknowledge {tp}")
        self._report(acks, results)
        return results

    def _fail_acks(self, acks: Acks, err: Exception) -> AckResults:
        """Report every acknowledgement of ``acks`` as failed with ``err``; the results."""
        results: AckResults = {tp: err for tp in acks}
        self._report(acks, results)
        return results

    def _report(self, acks: Acks, results: AckResults) -> None:
        """Hand acknowledgement results to the commit callback, one call per partition."""
        for tp, offs in acks.items():
            err = results.get(tp)
            if err is not None:
                log.debug("acknowledging %s failed: %r", tp, err)
            if self._callback is not None and offs:
                try:
                    self._callback({tp: set(offs)}, err)
                except Exception:  # noqa: BLE001 - as Java, a failing callback is logged
                    log.exception("acknowledgement commit callback failed")
