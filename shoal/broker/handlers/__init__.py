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

if TYPE_CHECKING:
    from shoal.broker.broker import Broker

MODULES = (api_versions, metadata_api, produce, fetch, list_offsets, topic_admin, describe_configs,
           alter_configs, describe_cluster, groups, transactions, log_admin, cluster_admin)


def register_all(broker: Broker) -> None:
    for module in MODULES:
        register = getattr(module, "register", None)
        if register is not None:
            register(broker)
