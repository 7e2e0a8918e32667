"""Command-line tools that talk to a cluster over the wire, as Kafka's own tools do (see `cli.py`).

They work against any Kafka-compatible cluster: they never start or call into a broker or
coordinator. Most use the protocol codec through a small blocking client (`wire.py`, secured
by `secure_wire.py` from a `--command-config` file with the client's TLS and SASL); the
console producer and consumer use shoal's Python client. They borrow pure helpers only:
the client's bootstrap parser, the broker's Java-properties parser, the coordinator's
`__consumer_offsets` record formatter and the assignors' consumer-protocol decoder.
"""
