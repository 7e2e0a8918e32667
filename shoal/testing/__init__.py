"""Brokers for tests: ``shoal.testing.broker()`` and the pytest plugin's fixtures.

    from shoal.testing import broker

    with broker(nodes=1, num_partitions=3) as b:
        producer = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap_servers})
        ...
        b.stop_node(0)          # fault tests: stop / start one node, or restart them all
        b.start_node(0)

``broker()`` runs the broker inside this process, on an event loop thread of
its own (ready in milliseconds); ``broker(mode="subprocess")`` runs ``shoal
serve`` as a child process, for tests that need ``kill()`` (SIGKILL) to be
real. ``async_broker()`` is the same for ``async with``. Keyword properties are
Kafka's broker properties with ``_`` for ``.`` (``num_partitions=3``);
``properties={"log.retention.ms": "1000"}`` takes them as written. Data goes
to a temporary folder, removed on exit, unless ``data_dir`` is given.

The pytest plugin (installed with shoal, nothing to configure) provides
``shoal_broker``, ``shoal_bootstrap`` and ``shoal_topic``; see
``shoal.testing.pytest_plugin``.
"""

from __future__ import annotations

from shoal.testing.embedded import EmbeddedBroker, async_broker, broker
from shoal.testing.process import BrokerProcess

__all__ = ["BrokerProcess", "EmbeddedBroker", "async_broker", "broker"]
