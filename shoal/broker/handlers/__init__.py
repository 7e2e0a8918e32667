"""API handlers, one module per API family; `register_all` fills a broker's table."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.broker.handlers import (
    alter_configs,
    api_versions,
    cluster_admin,
    describe_cluster,
    describe_configs,
    fetch,
    groups,
    list_offsets,
    log_admin,
    metadata_api,
    produce,
    topic_admin,
    transactions,
)

if TYPE_CHECKING:
    from shoal.broker.broker import Broker


def register_all(broker: Broker) -> None:
    for module in (api_versions, metadata_api, produce, fetch, list_offsets, topic_admin,
                   describe_configs, alter_configs, describe_cluster, groups, transactions, log_admin,
                   cluster_admin):
        module.register(broker)
