"""The command-line tools on a secured cluster: `--command-config` files with Kafka's client properties
(TLS and SASL), `shoal acls` (kafka-acls.sh) gating a confluent-kafka consumer, and SCRAM users made,
described and removed with `shoal configs --entity-type users` (kafka-configs.sh), then used by
confluent-kafka to authenticate. One shoal broker with a PLAINTEXT and a SASL_SSL listener and Kafka's
StandardAuthorizer (super user User:admin)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("cryptography")

from confluent_kafka import Consumer, KafkaException, Producer  # noqa: E402
from confluent_kafka.admin import AdminClient  # noqa: E402

from shoal.testing.embedded import EmbeddedBroker  # noqa: E402
from shoal.testing.tls_certs import make_pki  # noqa: E402

pytestmark = pytest.mark.timeout(240)

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
        'password="admin-pw" user_admin="admin-pw" user_alice="alice-pw";')
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(pki):
    props = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
             "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
             "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
             "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
             "super.users": "User:admin",
             **pki.broker_properties("SASL_SSL")}
    with EmbeddedBroker(properties=props) as b:
        yield b


def command_config(tmp_path: Path, pki, user: str = "admin", password: str = "admin-pw",
                   mechanism: str = "PLAIN") -> str:
    """A --command-config file as one writes it for Kafka's tools (PEM trust store)."""
    module = PLAIN_MODULE if mechanism == "PLAIN" else SCRAM_MODULE
    path = tmp_path / f"{user}-{mechanism}.properties"
    path.write_text("security.protocol=SASL_SSL\n"
                    f"sasl.mechanism={mechanism}\n"
                    f'sasl.jaas.config={module} required username="{user}" password="{password}";\n'
                    "ssl.truststore.type=PEM\n"
                    f"ssl.truststore.location={pki.ca_cert}\n")
    return str(path)


def shoal(bs: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([sys.executable, "-m", "shoal.cli", *args, "--bootstrap-server", bs], input=stdin,
                       capture_output=True, text=True, timeout=60)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def ok(r: subprocess.CompletedProcess[str]) -> str:
    assert r.returncode == 0, f"rc={r.returncode}\nstdout:{r.stdout}\nstderr:{r.stderr}"
    return r.stdout


def rdkafka(broker, pki, user: str, password: str, mechanism: str = "PLAIN", **extra: str) -> dict:
    return {"bootstrap.servers": broker.bootstrap("SASL_SSL"), "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": str(pki.ca_cert), **extra}


def test_tools_over_sasl_ssl(broker, pki, tmp_path):
    bs = broker.bootstrap("SASL_SSL")
    admin = command_config(tmp_path, pki)
    t = f"sec-{uuid.uuid4().hex[:8]}"
    assert ok(shoal(bs, "topics", "create", "--topic", t, "--partitions", "2", "--command-config", admin)) \
        == f"Created topic {t}.\n"
    assert t in ok(shoal(bs, "topics", "list", "--command-config", admin)).split()
    assert f"Topic: {t}\t" in ok(shoal(bs, "topics", "describe", "--topic", t, "--command-config", admin))
    assert ok(shoal(bs, "configs", "alter", "--topic", t, "--add-config", "retention.ms=60000",
                    "--command-config", admin)) == f"Completed updating config for topic {t}.\n"
    assert "retention.ms=60000" in ok(shoal(bs, "configs", "describe", "--topic", t, "--command-config", admin))
    ok(shoal(bs, "groups", "list", "--command-config", admin))
    ok(shoal(bs, "transactions", "list", "--command-config", admin))
    # the console tools take the file too (Kafka 4.1's --command-config)
    ok(shoal(bs, "produce", "--topic", t, "--command-config", admin, stdin="a\nb\n"))
    r = shoal(bs, "consume", "--topic", t, "--from-beginning", "--max-messages", "2", "--timeout-ms", "20000",
              "--command-config", admin)
    assert sorted(ok(r).split()) == ["a", "b"]

    # without the file the SASL_SSL listener is not spoken to; a wrong password or CA fails in one line
    assert shoal(bs, "topics", "list", "--timeout", "3").returncode == 1
    bad = command_config(tmp_path, pki, password="nope")
    r = shoal(bs, "topics", "list", "--command-config", bad)
    assert r.returncode == 1 and "Authentication failed" in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    other = make_pki(tmp_path / "other")
    wrong_ca = Path(command_config(tmp_path, other, user="x"))
    r = shoal(bs, "topics", "list", "--command-config", str(wrong_ca))
    assert r.returncode == 1 and "SSL handshake" in r.stderr, r.stderr
    r = shoal(bs, "topics", "list", "--command-config", str(tmp_path / "missing.properties"))
    assert r.returncode == 1 and "cannot read" in r.stderr
    # the PLAINTEXT listener's clients are User:ANONYMOUS, no super user: the ACL APIs refuse them
    r = shoal(broker.bootstrap("PLAINTEXT"), "acls", "--list")
    assert r.returncode == 1
    assert r.stdout.startswith("Error while executing ACL command: "
                               "org.apache.kafka.common.errors.ClusterAuthorizationException"), r.stdout


def _poll_values(conf: dict, topic: str, want: int, timeout_polls: int = 30) -> tuple[list[bytes], list[str]]:
    c = Consumer({**conf, "group.id": f"{topic}-g", "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    errors: list[str] = []
    try:
        for _ in range(timeout_polls):
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                errors.append(m.error().name())
                if errors[-1].endswith("AUTHORIZATION_FAILED"):
                    break
            else:
                got.append(m.value())
                if len(got) == want:
                    break
    finally:
        c.close()
    return got, errors


def test_acls_add_list_remove_gate_a_consumer(broker, pki, tmp_path):
    bs = broker.bootstrap("SASL_SSL")
    admin = command_config(tmp_path, pki)
    t = f"acl-{uuid.uuid4().hex[:8]}"
    ok(shoal(bs, "topics", "create", "--topic", t, "--partitions", "1", "--command-config", admin))
    p = Producer(rdkafka(broker, pki, "admin", "admin-pw"))
    for i in range(3):
        p.produce(t, f"v{i}".encode())
    assert p.flush(20) == 0
    alice = rdkafka(broker, pki, "alice", "alice-pw")

    got, errors = _poll_values(alice, t, 3)
    assert got == [] and any(e.endswith("AUTHORIZATION_FAILED") for e in errors), errors

    out = ok(shoal(bs, "acls", "--add", "--consumer", "--topic", t, "--group", f"{t}-g",
                   "--allow-principal", "User:alice", "--command-config", admin))
    topic_pattern = f"ResourcePattern(resourceType=TOPIC, name={t}, patternType=LITERAL)"
    group_pattern = f"ResourcePattern(resourceType=GROUP, name={t}-g, patternType=LITERAL)"
    assert out == (f"Adding ACLs for resource `{topic_pattern}`: \n"
                   " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
                   "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)\n\n"
                   f"Adding ACLs for resource `{group_pattern}`: \n"
                   " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n\n")
    got, errors = _poll_values(alice, t, 3)
    assert got == [b"v0", b"v1", b"v2"], errors

    out = ok(shoal(bs, "acls", "--list", "--topic", t, "--command-config", admin))
    assert out.startswith(f"Current ACLs for resource `{topic_pattern}`:\n\t")
    assert sorted(out.splitlines()[1:3]) == ["\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)",
                                             "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"]
    out = ok(shoal(bs, "acls", "--list", "--command-config", admin, "--principal", "User:alice", "--group", f"{t}-g"))
    assert out == (f"ACLs for principal `User:alice`\nCurrent ACLs for resource `{group_pattern}`:\n"
                   "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n\n")
    out = ok(shoal(bs, "acls", "--list", "--resource-pattern-type", "match", "--topic", t, "--command-config", admin))
    assert topic_pattern in out

    # --remove asks first: "n" keeps the ACLs, "y" (or --force) removes them
    out = ok(shoal(bs, "acls", "--remove", "--topic", t, "--command-config", admin, stdin="n\n"))
    assert out == f"Are you sure you want to delete all ACLs for resource filter `{topic_pattern}`? (y/n)\n"
    assert ok(shoal(bs, "acls", "--list", "--topic", t, "--command-config", admin))
    out = ok(shoal(bs, "acls", "--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", t,
                   "--command-config", admin, stdin="y\n"))
    assert out == ("Are you sure you want to remove ACLs: \n"
                   " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
                   f" from resource filter `{topic_pattern}`? (y/n)\n")
    out = ok(shoal(bs, "acls", "--list", "--topic", t, "--command-config", admin))
    assert "operation=READ" not in out and "operation=DESCRIBE" in out
    assert ok(shoal(bs, "acls", "--remove", "--force", "--topic", t, "--group", f"{t}-g",
                    "--command-config", admin)) == ""
    assert ok(shoal(bs, "acls", "--list", "--topic", t, "--group", f"{t}-g", "--command-config", admin)) == ""

    # the command line is checked as Kafka's AclCommand checks it, before connecting
    r = shoal(bs, "acls", "--add", "--topic", t, "--command-config", admin)
    assert r.returncode == 1 and r.stderr == ("You must specify one of: --allow-principal, --deny-principal when "
                                              "trying to add ACLs.\n")
    r = shoal(bs, "acls", "--add", "--group", "g", "--operation", "Write", "--allow-principal", "User:a")
    assert r.returncode == 1 and r.stderr.startswith("ResourceType GROUP only supports operations [")
    r = shoal(bs, "acls", "--add", "--list", "--topic", t)
    assert r.returncode == 1 and "exactly one action" in r.stderr
    r = shoal(bs, "acls", "--add", "--topic", t, "--allow-principal", "alice", "--command-config", admin)
    assert r.returncode == 1 and r.stdout == ("Error while executing ACL command: expected a string in format "
                                              "principalType:principalName but got alice\n")


def _authenticates(broker, pki, user: str, password: str) -> bool:
    admin = AdminClient(rdkafka(broker, pki, user, password, "SCRAM-SHA-256"))
    try:
        admin.list_topics(timeout=10)
    except KafkaException:
        return False
    return True


def test_scram_users_with_configs(broker, pki, tmp_path):
    bs = broker.bootstrap("SASL_SSL")
    admin = command_config(tmp_path, pki)
    user = f"carol{uuid.uuid4().hex[:6]}"
    assert not _authenticates(broker, pki, user, "carol-secret")
    out = ok(shoal(bs, "configs", "--entity-type", "users", "--entity-name", user, "--alter", "--add-config",
                   "SCRAM-SHA-256=[iterations=8192,password=carol-secret]", "--command-config", admin))
    assert out == f"Completed updating config for user {user}.\n"
    assert _authenticates(broker, pki, user, "carol-secret")
    assert not _authenticates(broker, pki, user, "wrong")
    # the user's own --command-config works for the tools too (SCRAM through shoal's mechanism client)
    ok(shoal(bs, "topics", "list", "--command-config",
             command_config(tmp_path, pki, user, "carol-secret", "SCRAM-SHA-256")))

    # a second mechanism: one per command; both in one command is refused by the broker, as with Kafka's tool
    r = shoal(bs, "configs", "--entity-type", "users", "--entity-name", user, "--alter", "--add-config",
              "SCRAM-SHA-256=[password=x],SCRAM-SHA-512=[password=y]", "--command-config", admin)
    assert r.returncode == 1 and "A user credential cannot be altered twice in the same request" in r.stderr
    ok(shoal(bs, "configs", "alter", "--user", user, "--add-config", "SCRAM-SHA-512=[password=carol-512]",
             "--command-config", admin))
    out = ok(shoal(bs, "configs", "--entity-type", "users", "--entity-name", user, "--describe",
                   "--command-config", admin))
    assert out == (f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-256=iterations=8192, "
                   "SCRAM-SHA-512=iterations=4096\n")
    out = ok(shoal(bs, "configs", "--entity-type", "users", "--describe", "--command-config", admin))
    assert f"SCRAM credential configs for user-principal '{user}' are " in out
    assert ok(shoal(bs, "configs", "--entity-type", "users", "--entity-name", "nobody", "--describe",
                    "--command-config", admin)) == ""

    out = ok(shoal(bs, "configs", "--entity-type", "users", "--entity-name", user, "--alter", "--delete-config",
                   "SCRAM-SHA-256", "--command-config", admin))
    assert out == f"Completed updating config for user {user}.\n"
    assert not _authenticates(broker, pki, user, "carol-secret")
    out = ok(shoal(bs, "configs", "--entity-type", "users", "--entity-name", user, "--describe",
                   "--command-config", admin))
    assert out == f"SCRAM credential configs for user-principal '{user}' are SCRAM-SHA-512=iterations=4096\n"

    for config, message in [("SCRAM-SHA-256=[iterations=100,password=x]",
                             "Iterations 100 is less than the minimum 4096 required for SCRAM-SHA-256"),
                            ("SCRAM-SHA-256=[pass=x]", "Invalid credential property SCRAM-SHA-256=pass=x"),
                            ("quota.x=1", "Only quota and SCRAM credential configs can be added for 'users'")]:
        r = shoal(bs, "configs", "--entity-type", "users", "--entity-name", user, "--alter", "--add-config", config,
                  "--command-config", admin)
        assert r.returncode == 1 and message in r.stderr, r.stderr
    r = shoal(bs, "configs", "--entity-type", "users", "--entity-name", "nobody", "--alter", "--delete-config",
              "SCRAM-SHA-256", "--command-config", admin)
    assert r.returncode == 1 and "Attempt to delete a user credential that does not exist" in r.stderr
