"""The generated codec tables as the client uses them, and the client's version caps."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from shoal.protocol.generated import VERSION_RANGES, api_spec
from shoal.protocol.generated.api_keys import ApiKey


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


# Versions above these change the request's shape in ways this client does not build
# (topic ids instead of names in Fetch v13+, batched groups in OffsetFetch v8+, ...).
CLIENT_MAX_VERSIONS: dict[int, int] = {
    ApiKey.FETCH: 12,
    ApiKey.OFFSET_FETCH: 7,
    ApiKey.DELETE_TOPICS: 5,
    ApiKey.METADATA: 12,
    ApiKey.PRODUCE: 11,
    ApiKey.API_VERSIONS: 3,
    # Transaction version 2 (KIP-890 part 2: EndTxn v5) is not implemented; v4+ of
    # AddPartitionsToTxn is the brokers' batched form.
    ApiKey.END_TXN: 4,
    ApiKey.ADD_PARTITIONS_TO_TXN: 3,
    ApiKey.TXN_OFFSET_COMMIT: 4,
}


def request_class(api_key: int) -> Any:
    return SPECS[api_key].request
