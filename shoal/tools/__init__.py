"""Command-line tools that talk to a cluster over the wire: `shoal groups`, `shoal offsets`.

They use only the protocol codec (and the pure `__consumer_offsets` record
formatter), never the broker or coordinator runtime, so they work against any
Kafka-compatible cluster, as Kafka's own tools do.
"""
