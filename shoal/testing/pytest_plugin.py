"""shoal's pytest plugin: a Kafka broker for a test suite, with nothing to set up.

Installed with shoal (entry point ``pytest11``), it provides:

- ``shoal_broker``: one broker for the whole session (an ``EmbeddedBroker``:
  ``bootstrap_servers``, ``stop_node``, ``start_node``, ``restart``), its data
  in pytest's temporary folder;
- ``shoal_bootstrap``: its bootstrap string, for any client (confluent-kafka,
  kafka-python, aiokafka, shoal's own);
- ``shoal_topic``: a topic of its own for each test (a name derived from the
  test's), created before the test and deleted after it. Ask for more
  partitions or topic configs with
  ``@pytest.mark.shoal_topic(partitions=3, config={"cleanup.policy": "compact"})``.

Settings (command line, or ``[tool.pytest.ini_options]`` with the same names
without ``--`` and with ``_``): ``--shoal-nodes N`` (1),
``--shoal-property KEY=VALUE`` (repeatable; broker properties),
``--shoal-mode thread|subprocess`` (thread), ``--shoal-security
SASL_PLAINTEXT|SASL_SSL|SSL`` (a secured listener beside PLAINTEXT; the
``shoal_security`` fixture then gives its address, user and certificates, and
``client_properties()`` for a client), and ``--shoal-bootstrap HOST:PORT`` to
run the same tests against a cluster you already have (Apache Kafka
included): then nothing is started, and the fault methods raise.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from typing import Any

import pytest

_counter = itertools.count()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("shoal", "shoal: a Kafka broker for tests")
    group.addoption("--shoal-nodes", type=int, default=None, help="broker nodes in the session's cluster (1)")
    group.addoption("--shoal-property", action="append", default=None, metavar="KEY=VALUE",
                    help="a broker property (repeatable)")
    group.addoption("--shoal-mode", choices=("thread", "subprocess"), default=None,
                    help="run the broker in this process (thread, the default) or as a child process")
    group.addoption("--shoal-bootstrap", default=None, metavar="HOST:PORT",
                    help="use this running cluster instead of starting a broker")
    group.addoption("--shoal-security", default=None, metavar="PROTOCOL",
                    help="add a SASL_PLAINTEXT, SASL_SSL or SSL listener (the shoal_security fixture)")
    parser.addini("shoal_nodes", "broker nodes in the session's cluster", default="1")
    parser.addini("shoal_properties", "broker properties, KEY=VALUE per line", type="linelist", default=[])
    parser.addini("shoal_mode", "thread or subprocess", default="thread")
    parser.addini("shoal_bootstrap", "use this running cluster instead of starting a broker", default="")
    parser.addini("shoal_security", "a secured listener: SASL_PLAINTEXT, SASL_SSL or SSL", default="")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "shoal_topic(partitions=1, replication_factor=1, config=None): "
                                       "the shoal_topic fixture's topic settings")


class ExternalCluster:
    """A cluster given with ``--shoal-bootstrap``: only its address."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers

    def _cannot(self, what: str) -> None:
        raise RuntimeError(f"shoal_broker.{what}() needs a broker the plugin started; --shoal-bootstrap named "
                           f"a cluster it does not control ({self.bootstrap_servers})")

    def stop_node(self, node_id: int) -> None:
        self._cannot("stop_node")

    def start_node(self, node_id: int) -> None:
        self._cannot("start_node")

    def restart(self) -> None:
        self._cannot("restart")


def _setting(config: pytest.Config, name: str) -> Any:
    value = config.getoption(f"shoal_{name}")
    return value if value is not None else config.getini(f"shoal_{name}")


@pytest.fixture(scope="session")
def shoal_broker(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Iterator[Any]:
    """The session's broker: ``bootstrap_servers``, and ``stop_node`` / ``start_node`` / ``restart``."""
    external = _setting(pytestconfig, "bootstrap")
    if external:
        yield ExternalCluster(external)
        return
    from shoal.testing.embedded import broker

    props = {}
    lines = list(pytestconfig.getini("shoal_properties")) + list(pytestconfig.getoption("shoal_property") or [])
    for line in lines:
        key, sep, value = line.partition("=")
        if not sep:
            raise pytest.UsageError(f"shoal property {line!r} is not KEY=VALUE")
        props[key.strip()] = value.strip()
    security = _setting(pytestconfig, "security")
    secured = None
    if security:
        from shoal.testing.secured import prepare

        secured = prepare(security, tmp_path_factory.mktemp("shoal-tls"))
        props = {**secured.broker_properties, **props}
    with broker(int(_setting(pytestconfig, "nodes")), mode=_setting(pytestconfig, "mode"),
                data_dir=tmp_path_factory.mktemp("shoal") / "data", properties=props) as b:
        if secured is not None:
            from shoal.testing.secured import add_scram_users

            if "SASL" in secured.protocol:
                add_scram_users(b.bootstrap_servers)
            secured.bootstrap_servers = b.bootstrap(secured.protocol)
        b.security = secured
        yield b


@pytest.fixture(scope="session")
def shoal_security(shoal_broker: Any) -> Any:
    """The secured listener of ``--shoal-security``: ``bootstrap_servers``, ``protocol``, ``username``,
    ``password``, ``mechanism``, ``ca_file``, ``cert_file``/``key_file`` (SSL) and ``client_properties()``."""
    security = getattr(shoal_broker, "security", None)
    if security is None:
        raise pytest.UsageError("shoal_security needs --shoal-security SASL_PLAINTEXT|SASL_SSL|SSL "
                                "(or shoal_security in the ini file)")
    return security


@pytest.fixture(scope="session")
def shoal_bootstrap(shoal_broker: Any) -> str:
    """The session broker's bootstrap string (``127.0.0.1:PORT``)."""
    return shoal_broker.bootstrap_servers


@pytest.fixture
def shoal_topic(shoal_bootstrap: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new topic for this test (deleted afterwards); ``@pytest.mark.shoal_topic(...)`` shapes it."""
    from shoal.client import AdminClient, NewTopic

    marker = request.node.get_closest_marker("shoal_topic")
    kw = dict(marker.kwargs) if marker is not None else {}
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-.")[:200] or "topic"
    name = f"{base}-{next(_counter)}"
    admin = AdminClient(bootstrap_servers=shoal_bootstrap)
    try:
        err = admin.create_topics([NewTopic(name, int(kw.get("partitions", 1)), int(kw.get("replication_factor", 1)),
                                            {k: str(v) for k, v in (kw.get("config") or {}).items()})])[name]
        if err is not None:
            raise err
        yield name
    finally:
        try:
            admin.delete_topics([name])
        except Exception:  # noqa: BLE001 - the test's outcome matters, not the clean-up's
            pass
        admin.close()
