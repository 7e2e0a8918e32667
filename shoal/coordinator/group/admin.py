"""DescribeGroups, ListGroups and DeleteGroups: what the admin APIs see of groups of any type."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shoal.coordinator.group.group import dead_group_description
from shoal.coordinator.group.state import GroupState
from shoal.coordinator.group.types import GroupType
from shoal.coordinator.result import ShardRequest
from shoal.protocol.acl_operations import GROUP_OPERATIONS
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.delete_groups_response import DeleteGroupsResponse
from shoal.protocol.generated.describe_groups_response import DescribeGroupsResponse
from shoal.protocol.generated.list_groups_response import ListGroupsResponse

if TYPE_CHECKING:
    from shoal.coordinator.group.shard import GroupCoordinatorShard

E = ErrorCode


DEAD = GroupState.DEAD.value


class GroupAdminManager:
    """The group admin APIs over the shard's registry (a `types.GroupTypeManager` with no records)."""

    record_key_versions: frozenset[int] = frozenset()

    def __init__(self, shard: GroupCoordinatorShard) -> None:
        self.shard = shard
        self._handlers: dict[ApiKey, Callable[[ShardRequest, Any, int], Any]] = {
            ApiKey.DESCRIBE_GROUPS: self.describe_groups, ApiKey.LIST_GROUPS: self.list_groups_request,
            ApiKey.DELETE_GROUPS: self.delete_groups}
        self.api_keys = frozenset(self._handlers)

    def handle(self, ctx: ShardRequest, request: Any, now_ms: int) -> Any:
        return self._handlers[ctx.api_key](ctx, request, now_ms)

    def replay(self, key: bytes, value: bytes | None, producer_id: int) -> None:
        raise AssertionError("the admin APIs replay no records")

    def on_loaded(self, now_ms: int) -> None:
        pass

    def unload(self) -> None:
        pass

    # ---------------------------------------------------------------- DescribeGroups
    def describe_groups(self, ctx: ShardRequest, req: Any, now_ms: int) -> DescribeGroupsResponse:
        groups = [self.describe_group(g, ctx.api_version) for g in req.groups]
        if ctx.api_version >= 3 and req.include_authorized_operations:
            for g in groups:  # KIP-430: every operation (no authorizer, as Kafka without one)
                g.authorized_operations = GROUP_OPERATIONS
        return DescribeGroupsResponse(groups=groups)

    def describe_group(self, group_id: str, version: int = 0) -> Any:
        """DescribeGroups entry: a classic group as it is; one not here, or of another type, is Dead, and
        from v6 (KIP-1043) carries GROUP_ID_NOT_FOUND with Kafka's message."""
        group = self.shard.groups.get(group_id)
        described = dead_group_description(group_id) if group is None else group.describe()
        if version >= 6 and described.group_state == DEAD:
            described.error_code = ErrorCode.GROUP_ID_NOT_FOUND
            described.error_message = (f"Group {group_id} is not a classic group." if group is not None
                                       and group.type is not GroupType.CLASSIC else f"Group {group_id} not found.")
        return described

    # ---------------------------------------------------------------- ListGroups
    def list_groups_request(self, ctx: ShardRequest, req: Any, now_ms: int) -> ListGroupsResponse:
        states = list(req.states_filter) if ctx.api_version >= 4 else []
        types = list(req.types_filter) if ctx.api_version >= 5 else []
        return ListGroupsResponse(error_code=0, groups=self.list_groups(states, types))

    def list_groups(self, states_filter: list[str], types_filter: list[str]) -> list[Any]:
        """Listed groups in the states and of the types asked (case-insensitive; empty: all)."""
        states = {s.lower() for s in states_filter}
        types = {t.lower() for t in types_filter}
        out = []
        for group in self.shard.groups.values():
            entry = group.list_entry()
            if entry is None or (states and entry.group_state.lower() not in states):
                continue
            if types and group.type.value not in types:
                continue
            out.append(entry)
        return out

    # ---------------------------------------------------------------- DeleteGroups
    def delete_groups(self, ctx: ShardRequest, req: Any, now_ms: int) -> DeleteGroupsResponse:
        return DeleteGroupsResponse(results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=int(self.delete_group(g)))
            for g in req.groups_names])

    def delete_group(self, group_id: str) -> ErrorCode:
        """DeleteGroups for one group: tombstones its offsets and the group."""
        if not group_id:
            return E.INVALID_GROUP_ID
        group = self.shard.groups.get(group_id)
        if group is None:
            return E.GROUP_ID_NOT_FOUND
        error = group.validate_delete_group()
        if error is not None:
            return error
        offsets = self.shard.offset_manager
        offsets.cleanup_groups([group], lambda g: list(offsets.group_offsets(g.group_id)))
        return E.NONE
