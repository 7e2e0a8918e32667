"""API handlers, one module per API family.

Importing this package declares every module-level handler (`broker.apis.handles`);
`register_all` adds those of modules not yet converted, which still register closures.
"""

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

# Modules converted to module-level handlers: importing them declares the handlers.
__all__ = ["api_versions", "describe_cluster", "register_all"]

if TYPE_CHECKING:
    from shoal.broker.broker import Broker


def register_all(broker: Broker) -> None:
    for module in (metadata_api, produce, fetch, list_offsets, topic_admin,
                   describe_configs, alter_configs, groups, transactions, log_admin,
                   cluster_admin):
        module.register(broker)
