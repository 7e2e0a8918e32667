"""The share group type (KIP-932): share groups served beside the classic and consumer types.

`heartbeat.ShareGroupManager` is the shard plug-in (ShareGroupHeartbeat, ShareGroupDescribe, the
records of key versions 10-15, the session timers); `group.ShareGroup` is the group (a `types.Group`);
`records` and `replay` are its `__consumer_offsets` records; `describe` builds ShareGroupDescribe.
Target assignments come from the `simple` assignor (`shoal.assignors.share_simple`). The share-fetch
data path (share sessions, in-flight records) is not here.
"""

from shoal.coordinator.group.share.group import ShareGroup, ShareGroupState, ShareMember

__all__ = ["ShareGroup", "ShareGroupState", "ShareMember"]
