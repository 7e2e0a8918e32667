"""The generated codec tables as the client uses them, and the client's version caps."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from shoal.protocol.generated import VERSION_RANGES, api_spec


class _Specs(Mapping[int, Any]):
    """Api key -> spec, each API's modules imported on first use (importing all ~200 generated
    modules up front costs a third of a second in every process that makes a client)."""

    def __getitem__(self, key: int) -> Any:
        return api_spec(key)

    def __iter__(self) -> Iterator[int]:
        return iter(VERSION_RANGES)

    def __len__(self) -> int:
        return len(VERSION_RANGES)

    def __contains__(self, key: object) -> bool:
        return key in VERSION_RANGES


SPECS: Mapping[int, Any] = _Specs()


def api_key_of(request: Any) -> int:
    """The api key of a generated request object."""
    return type(request).API_KEY


# Api keys used by the client.
PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, API_VERSIONS = 15, 16, 18
CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS = 19, 20, 21
CREATE_PARTITIONS, DELETE_GROUPS, OFFSET_DELETE, DESCRIBE_CLUSTER = 37, 42, 47, 60
INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
TXN_OFFSET_COMMIT = 28

# Versions above these change the request's shape in ways this client does not build
# (topic ids instead of names in Fetch v13+, batched groups in OffsetFetch v8+, ...).
CLIENT_MAX_VERSIONS: dict[int, int] = {
    FETCH: 12,
    OFFSET_FETCH: 7,
    DELETE_TOPICS: 5,
    METADATA: 12,
    PRODUCE: 11,
    API_VERSIONS: 3,
    # Transaction version 2 (KIP-890 part 2: EndTxn v5) is not implemented; v4+ of
    # AddPartitionsToTxn is the brokers' batched form.
    END_TXN: 4,
    ADD_PARTITIONS_TO_TXN: 3,
    TXN_OFFSET_COMMIT: 4,
}


def request_class(api_key: int) -> Any:
    return SPECS[api_key].request


def nested(cls: Any, name: str) -> Any:
    """A nested struct class of a generated message class."""
    return getattr(cls, name)
