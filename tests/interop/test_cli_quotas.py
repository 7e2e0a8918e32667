"""Client quotas in the tools: `shoal configs --entity-type users|clients|ips` (kafka-configs' flags and
lines) and its alias `shoal client-quotas`, as subprocesses against an embedded broker: set, describe,
delete, and bad input answered with Kafka's message on one stderr line. (tests/reference/
test_tools_vs_kafka.py runs the same steps with Kafka's ConfigCommand next to shoal's tool.)"""

from __future__ import annotations

import pytest

from shoal.testing.embedded import EmbeddedBroker
from tests.interop.test_cli_tools import ok, one_line_error, shoal_cmd

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def run(tmp_path):
    with EmbeddedBroker(data_dir=tmp_path / "data") as broker:
        yield shoal_cmd(broker.bootstrap_servers)


def test_quotas_set_describe_delete(run):
    assert ok(run("configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config",
                  "producer_byte_rate=1024,consumer_byte_rate=2048,request_percentage=50")) \
        == "Completed updating config for user alice.\n"
    assert ok(run("configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                  "--entity-name", "app", "--add-config", "producer_byte_rate=100")) \
        == "Completed updating config for user alice.\n"
    assert ok(run("configs", "--alter", "--entity-type", "clients", "--entity-default", "--add-config",
                  "request_percentage=12.5")) == "Completed updating default config for clients in the cluster.\n"
    assert ok(run("configs", "--alter", "--user-defaults", "--add-config", "producer_byte_rate=10000000")) \
        == "Completed updating default config for users in the cluster.\n"
    assert ok(run("configs", "--alter", "--entity-type", "ips", "--entity-name", "10.0.0.1", "--add-config",
                  "connection_creation_rate=10")) == "Completed updating config for ip 10.0.0.1.\n"
    # SCRAM credentials and quotas of one user: one describe prints both, quota lines first
    ok(run("configs", "--alter", "--user", "alice", "--add-config", "SCRAM-SHA-256=[password=alice-secret]"))
    out = ok(run("configs", "--describe", "--entity-type", "users", "--entity-name", "alice")).splitlines()
    assert len(out) == 2 and out[1] == "SCRAM credential configs for user-principal 'alice' are " \
                                       "SCRAM-SHA-256=iterations=4096"
    assert out[0].startswith("Quota configs for user-principal 'alice' are ")
    assert sorted(out[0].split(" are ")[1].split(", ")) == [
        "consumer_byte_rate=2048.0", "producer_byte_rate=1024.0", "request_percentage=50.0"]
    # every user: the user-only entities (default too), then every user's SCRAM credentials
    out = ok(run("configs", "--describe", "--entity-type", "users")).splitlines()
    assert "Quota configs for the default user-principal are producer_byte_rate=1.0E7" in out[:2]
    assert any(line.startswith("Quota configs for user-principal 'alice' are ") for line in out[:2])
    assert out[2:] == ["SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096"]
    assert ok(run("configs", "--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type",
                  "clients")) == "Quota configs for user-principal 'alice', client-id 'app' are producer_byte_rate=100.0\n"
    assert ok(run("configs", "--describe", "--entity-type", "clients")) \
        == "Quota configs for the default client-id are request_percentage=12.5\n"
    assert ok(run("configs", "--describe", "--entity-type", "ips")) \
        == "Quota configs for ip '10.0.0.1' are connection_creation_rate=10.0\n"

    assert ok(run("configs", "--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config",
                  "producer_byte_rate,consumer_byte_rate")) == "Completed updating config for user alice.\n"
    assert ok(run("configs", "--describe", "--user", "alice")) == (
        "Quota configs for user-principal 'alice' are request_percentage=50.0\n"
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096\n")
    ok(run("configs", "--alter", "--user", "alice", "--delete-config", "request_percentage"))
    ok(run("configs", "--alter", "--user", "alice", "--client", "app", "--delete-config", "producer_byte_rate"))
    assert ok(run("configs", "--describe", "--entity-type", "users", "--entity-type", "clients")) == ""
    assert ok(run("configs", "--describe", "--user", "alice")) \
        == "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096\n"


def test_quota_errors_are_kafkas(run):
    def alter(*entity: str, add: str | None = None, delete: str | None = None):  # noqa: ANN202
        return run("configs", "--alter", *entity, *(("--add-config", add) if add else ()),
                   *(("--delete-config", delete) if delete else ()))

    alice = ("--entity-type", "users", "--entity-name", "alice")
    for args, message in [
        (dict(add="producer_byte_rate=1,SCRAM-SHA-256=[password=x]"),
         "Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using --bootstrap-server."),
        (dict(add="zzz=1,aaa=2,mmm=3"), "Only quota and SCRAM credential configs can be added for 'users' using "
                                        "--bootstrap-server. Unexpected config names: aaa,zzz,mmm"),
        (dict(add="producer_byte_rate=abc"), "Cannot parse quota configuration value for producer_byte_rate: abc"),
        (dict(add="producer_byte_rate=1.5"), "producer_byte_rate cannot be a fractional value."),
        (dict(add="producer_byte_rate=-5"), "Quota producer_byte_rate must be greater than 0"),
        (dict(delete="request_percentage,producer_byte_rate"), "Invalid config(s): request_percentage,producer_byte_rate"),
    ]:
        one_line_error(alter(*alice, **args), message)
    one_line_error(alter("--entity-type", "clients", "--entity-name", "app", add="SCRAM-SHA-256=[password=x]"),
                   "Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected config names: "
                   "SCRAM-SHA-256")
    one_line_error(alter("--entity-type", "ips", "--entity-name", "10.0.0.1", add="producer_byte_rate=1"),
                   "Only connection quota configs can be added for 'ips' using --bootstrap-server. Unexpected config "
                   "names: producer_byte_rate")
    one_line_error(alter("--entity-type", "users", "--entity-default", add="SCRAM-SHA-256=[password=x]"),
                   "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials")
    one_line_error(alter("--entity-type", "users", "--entity-type", "clients", "--entity-name", "app",
                         add="producer_byte_rate=1"), "An entity name must be specified for every entity type")
    one_line_error(alter("--entity-type", "ips", "--entity-name", "1.2.3.4", "--entity-type", "users",
                         "--entity-name", "a", add="connection_creation_rate=1"),
                   "Only 'users' and 'clients' entity types may be specified together")
    one_line_error(alter("--entity-type", "users", add="producer_byte_rate=1"),
                   "An entity-name or default entity must be specified with --alter of users, clients, brokers or ips")
    one_line_error(run("configs", "--describe", "--user", "alice", "--entity-type", "users"),
                   "--entity-{type,name,default} should not be used in conjunction with specific entity flags")
    assert ok(run("configs", "--describe", "--entity-type", "users")) == ""  # nothing was set


def test_client_quotas_alias(run):
    assert ok(run("client-quotas", "--alter", "--entity-type", "clients", "--entity-name", "app", "--add-config",
                  "consumer_byte_rate=4096")) == "Completed updating config for client app.\n"
    ok(run("client-quotas", "alter", "--user", "bob", "--add-config", "producer_byte_rate=512"))
    ok(run("configs", "--alter", "--user", "bob", "--add-config", "SCRAM-SHA-512=[password=bob-secret]"))
    # quota lines only (no SCRAM lines), and without an entity type every entity
    assert ok(run("client-quotas", "--describe", "--user", "bob")) \
        == "Quota configs for user-principal 'bob' are producer_byte_rate=512.0\n"
    assert sorted(ok(run("client-quotas", "describe")).splitlines()) == [
        "Quota configs for client-id 'app' are consumer_byte_rate=4096.0",
        "Quota configs for user-principal 'bob' are producer_byte_rate=512.0"]
    one_line_error(run("client-quotas", "--alter", "--user", "bob", "--add-config", "SCRAM-SHA-256=[password=x]"),
                   "SCRAM credentials are altered with `shoal configs`")
    ok(run("client-quotas", "--alter", "--client", "app", "--delete-config", "consumer_byte_rate"))
    assert ok(run("client-quotas", "--describe", "--entity-type", "clients")) == ""
