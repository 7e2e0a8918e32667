"""API handlers, one module per API family.

Each module declares its handlers at module level with `broker.apis.handles`;
importing this package declares them all (`ApiRegistry.default()` does).
"""

from shoal.broker.handlers import (
    acl_admin,
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
    quota_admin,
    sasl,
    scram_admin,
    share_fetch,
    share_groups,
    share_offsets,
    topic_admin,
    transactions,
)

__all__ = ["acl_admin", "alter_configs", "api_versions", "cluster_admin", "describe_cluster", "describe_configs", "fetch",
           "groups", "list_offsets", "log_admin", "metadata_api", "produce", "quota_admin", "sasl", "scram_admin", "share_fetch", "share_offsets", "share_groups",
           "topic_admin", "transactions"]
