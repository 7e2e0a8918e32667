"""The five states of a classic group and Kafka's allowed transitions."""

from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    """Classic group states; `.value` is the name Kafka reports (DescribeGroups, ListGroups)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# target state -> states it may be entered from (Kafka's validPreviousStates).
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
            GroupState.DEAD,
        }
    ),
}


class IllegalStateTransition(RuntimeError):
    """A transition Kafka's state machine does not allow (a coordinator bug)."""


def check_transition(group_id: str, current: GroupState, target: GroupState) -> None:
    """Raise IllegalStateTransition unless `current -> target` is allowed."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalStateTransition(
            f"Group {group_id} should be in one of "
            f"{sorted(s.value for s in VALID_PREVIOUS_STATES[target])} before moving to "
            f"{target.value}; it is in {current.value}"
        )
