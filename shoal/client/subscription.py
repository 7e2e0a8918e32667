"""What the consumer is subscribed to / assigned, and each partition's fetch position."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import IllegalStateError
from .structs import OffsetAndMetadata, TopicPartition


@dataclass
class PartitionState:
    position: int | None = None
    paused: bool = False
    reset_strategy: str | None = None  # pending reset: "earliest" | "latest"


class SubscriptionState:
    """Subscription (topics, pattern or manual assignment) and per-partition state."""

    NONE, AUTO_TOPICS, AUTO_PATTERN, USER_ASSIGNED = range(4)

    def __init__(self, default_reset: str) -> None:
        self.kind = self.NONE
        self.topics: set[str] = set()
        self.pattern: re.Pattern[str] | None = None
        self.listener: Any = None
        self.assignment: dict[TopicPartition, PartitionState] = {}
        self.default_reset = default_reset
        self.needs_rejoin_for_subscription = False

    def _set_kind(self, kind: int) -> None:
        if self.kind not in (self.NONE, kind):
            raise IllegalStateError("subscribe() and assign() are mutually exclusive; unsubscribe() first")
        self.kind = kind

    def subscribe(self, topics: list[str], listener: Any = None) -> bool:
        self._set_kind(self.AUTO_TOPICS)
        self.listener = listener
        changed = set(topics) != self.topics
        self.topics = set(topics)
        return changed

    def subscribe_pattern(self, pattern: str | re.Pattern[str], listener: Any = None) -> None:
        self._set_kind(self.AUTO_PATTERN)
        self.listener = listener
        self.pattern = re.compile(pattern) if isinstance(pattern, str) else pattern

    def match_pattern(self, all_topics: list[str]) -> bool:
        """Set topics to those matching the pattern; True if that changed them."""
        assert self.pattern is not None
        matched = {t for t in all_topics if self.pattern.fullmatch(t)}
        changed = matched != self.topics
        self.topics = matched
        return changed

    def assign_from_user(self, partitions: list[TopicPartition]) -> None:
        self._set_kind(self.USER_ASSIGNED)
        self.set_assignment(partitions)

    def unsubscribe(self) -> None:
        self.kind = self.NONE
        self.topics = set()
        self.pattern = None
        self.listener = None
        self.assignment = {}

    @property
    def has_auto_assignment(self) -> bool:
        return self.kind in (self.AUTO_TOPICS, self.AUTO_PATTERN)

    def set_assignment(self, partitions: list[TopicPartition]) -> None:
        """Replace the assignment, keeping the state of partitions that stay."""
        self.assignment = {tp: self.assignment.get(tp) or PartitionState() for tp in partitions}

    def assigned(self) -> list[TopicPartition]:
        return list(self.assignment)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self.assignment

    def state(self, tp: TopicPartition) -> PartitionState:
        try:
            return self.assignment[tp]
        except KeyError:
            raise IllegalStateError(f"{tp} is not assigned to this consumer") from None

    def is_fetchable(self, tp: TopicPartition) -> bool:
        st = self.assignment.get(tp)
        return st is not None and not st.paused and st.position is not None

    def seek(self, tp: TopicPartition, offset: int) -> None:
        st = self.state(tp)
        st.position = offset
        st.reset_strategy = None

    def request_reset(self, tp: TopicPartition, strategy: str | None = None) -> None:
        st = self.state(tp)
        st.reset_strategy = strategy or self.default_reset
        st.position = None

    def missing_positions(self) -> list[TopicPartition]:
        return [tp for tp, st in self.assignment.items() if st.position is None and st.reset_strategy is None]

    def awaiting_reset(self) -> list[TopicPartition]:
        return [tp for tp, st in self.assignment.items() if st.position is None and st.reset_strategy]

    def consumed_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: OffsetAndMetadata(st.position) for tp, st in self.assignment.items() if st.position is not None}
