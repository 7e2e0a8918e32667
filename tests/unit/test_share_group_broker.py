"""Share groups over sockets: a running shoal answers ShareGroupHeartbeat v1 and ShareGroupDescribe v1
(raw requests), and advertises exactly v1 of both in ApiVersions."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.api_versions_request import ApiVersionsRequest
from shoal.protocol.generated.find_coordinator_request import FindCoordinatorRequest
from shoal.protocol.generated.share_group_describe_request import ShareGroupDescribeRequest
from shoal.protocol.generated.share_group_heartbeat_request import ShareGroupHeartbeatRequest
from tests.unit.broker_harness import RawClient, create_req, port, run, running_broker

RETRIABLE = {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR}


async def _heartbeat(client: RawClient, member_id: str, epoch: int, topics: list[str] | None) -> Any:
    req = ShareGroupHeartbeatRequest(group_id="sg", member_id=member_id, member_epoch=epoch,
                                     subscribed_topic_names=topics)
    for _ in range(100):
        resp = await client.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, req)
        if resp.error_code not in RETRIABLE:
            return resp
        await asyncio.sleep(0.05)
    raise AssertionError(f"coordinator never ready: {resp}")


def test_share_group_over_sockets(tmp_path: Path) -> None:
    async def go() -> None:
        async with running_broker(tmp_path) as broker:
            client = await RawClient.connect(port(broker))
            versions = await client.call(ApiKey.API_VERSIONS, 3, ApiVersionsRequest(
                client_software_name="t", client_software_version="1"))
            advertised = {v.api_key: (v.min_version, v.max_version) for v in versions.api_keys}
            assert advertised[ApiKey.SHARE_GROUP_HEARTBEAT] == (1, 1)
            assert advertised[ApiKey.SHARE_GROUP_DESCRIBE] == (1, 1)

            created = await client.call(ApiKey.CREATE_TOPICS, 7, create_req("orders", partitions=2))
            assert created.topics[0].error_code == 0
            topic_id = created.topics[0].topic_id
            await client.call(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["sg"]))

            members = [str(uuid.uuid4()) for _ in range(3)]
            epochs = {}
            for m in members:
                r = await _heartbeat(client, m, 0, ["orders"])
                assert r.error_code == 0 and r.member_id == m, r
                epochs[m] = r.member_epoch
            final: dict[str, set[int]] = {}
            for m in members:  # one more round: every member takes its share of the target
                r = await _heartbeat(client, m, epochs[m], None)
                assert r.error_code == 0, r
                if r.assignment is not None:
                    final[m] = {p for tp in r.assignment.topic_partitions for p in tp.partitions}
                epochs[m] = r.member_epoch
            assert len(set(epochs.values())) == 1

            desc = await client.call(ApiKey.SHARE_GROUP_DESCRIBE, 1, ShareGroupDescribeRequest(
                group_ids=["sg", "nope"], include_authorized_operations=True))
            sg, nope = desc.groups
            assert (sg.error_code, sg.group_state, sg.assignor_name) == (0, "Stable", "simple")
            assert sg.group_epoch == sg.assignment_epoch == epochs[members[0]]
            owned = {m.member_id: {p for tp in m.assignment.topic_partitions for p in tp.partitions}
                     for m in sg.members}
            assert set(owned) == set(members) and all(owned.values())
            assert all(tp.topic_id == topic_id and tp.topic_name == "orders"
                       for m in sg.members for tp in m.assignment.topic_partitions)
            # 3 members on 2 partitions: each partition shared by two members
            assert Counter(p for ps in owned.values() for p in ps) == Counter({0: 2, 1: 2})
            for m, ps in final.items():
                assert owned[m] == ps
            assert (nope.error_code, nope.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND, "Group nope not found.")

            bad = await client.call(ApiKey.SHARE_GROUP_HEARTBEAT, 1, ShareGroupHeartbeatRequest(
                group_id="sg", member_id="", member_epoch=0, subscribed_topic_names=["orders"]))
            assert (bad.error_code, bad.error_message) == (ErrorCode.INVALID_REQUEST,
                                                           "Invalid member id in the request.")
            left = await _heartbeat(client, members[0], -1, None)
            assert (left.error_code, left.member_epoch) == (0, -1)
            await client.close()

    run(go())
