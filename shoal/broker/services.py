"""What a handler may use of the broker: a narrow, typed view (`BrokerServices`).

Handlers type against this Protocol, never against `broker.broker.Broker`, so
they import nothing of the class that imports them (no import cycle) and can
be tested with any object that has these attributes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from shoal.broker.apis import ApiRegistry
    from shoal.broker.config import BrokerConfig
    from shoal.broker.metadata import ClusterMetadata


class NodeView(Protocol):
    """One broker node as handlers see it."""

    node_id: int
    advertised_host: str
    port: int
    running: bool


class BrokerServices(Protocol):
    """The broker state and operations that request handlers use."""

    config: BrokerConfig
    cluster_id: str
    metadata: ClusterMetadata
    apis: ApiRegistry
    nodes: dict[int, Any]
