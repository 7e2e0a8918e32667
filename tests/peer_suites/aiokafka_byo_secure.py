# Appended to aiokafka's tests/conftest.py (v0.14.0) to run its SASL, SSL and ACL tests
# (tests/test_sasl.py, test_ssl_consume, test_producer_ssl, test_create_ssl_context) against a
# running shoal instead of their Docker image (issue #19). Like aiokafka_byo.py, later definitions
# in a module replace earlier ones, so these fixtures take the place of the Docker ones.
#
# The broker is a shoal set up as their docker/scripts/start-kafka.sh sets Kafka up: listeners
# PLAINTEXT, SSL (ssl.client.auth=required), SASL_PLAINTEXT and SASL_SSL; PLAIN users from their
# kafka_server_jaas.conf (admin/admin, test/test, test2/test2); an authorizer with
# allow.everyone.if.no.acl.found=true and super.users=User:admin. GSSAPI is not served by shoal.
# Environment:
#   SHOAL_HOST            host of every listener (e.g. 127.0.0.1)
#   SHOAL_PORT, SHOAL_SSL_PORT, SHOAL_SASL_PLAIN_PORT, SHOAL_SASL_SSL_PORT
# tests/ssl_cert must hold the files their gen-ssl-certs.sh writes (run it there); the broker's
# key and certificate are their br_server.keystore.jks converted to PEM (see
# docs/compatibility.md). Their kafka-acls.sh / kafka-configs.sh calls (docker exec) are replaced
# by the same requests over the wire, made with confluent-kafka's AdminClient as the super user
# admin on the SASL_PLAINTEXT listener (or, with SHOAL_ACLS_TOOL=/path/to/shoal, their own
# ACLManager's kafka-acls.sh options given to `shoal acls`).
import os as _os
import pathlib as _pathlib

import pytest as _pytest


def _shoal_admin():
    from confluent_kafka.admin import AdminClient

    return AdminClient(
        {
            "bootstrap.servers": f"{_os.environ['SHOAL_HOST']}:{_os.environ['SHOAL_SASL_PLAIN_PORT']}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "admin",
            "sasl.password": "admin",
        }
    )


class _ShoalKafkaServer:
    def __init__(self) -> None:
        env = _os.environ
        self.host = env["SHOAL_HOST"]
        self.port = int(env["SHOAL_PORT"])
        self.ssl_port = int(env["SHOAL_SSL_PORT"])
        self.sasl_plain_port = int(env["SHOAL_SASL_PLAIN_PORT"])
        self.sasl_ssl_port = int(env["SHOAL_SASL_SSL_PORT"])
        self.container = None

    @property
    def hosts(self) -> list[str]:
        return [f"{self.host}:{self.port}"]


class _ShoalACLManager:
    """Their ACLManager's add_acl/remove_acl/list_acl/cleanup (kafka-acls.sh --add/--remove/
    --list with --topic/--group/--transactional-id/--cluster, --allow-/--deny-principal,
    --allow-/--deny-host, --operation, --producer, --consumer) as CreateAcls/DeleteAcls/
    DescribeAcls requests."""

    def __init__(self) -> None:
        self._active_acls = []

    @staticmethod
    def _bindings(
        cluster=None,
        topic=None,
        group=None,
        transactional_id=None,
        allow_principal=None,
        deny_principal=None,
        allow_host=None,
        deny_host=None,
        operation=None,
        producer=None,
        consumer=None,
    ):
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        resources = []
        if cluster:
            resources.append((ResourceType.BROKER, "kafka-cluster"))
        if topic is not None:
            resources.append((ResourceType.TOPIC, topic))
        if group is not None:
            resources.append((ResourceType.GROUP, group))
        if transactional_id is not None:
            resources.append((ResourceType.TRANSACTIONAL_ID, transactional_id))
        principals = []
        if allow_principal is not None:
            principals.append((f"User:{allow_principal}", allow_host or "*", AclPermissionType.ALLOW))
        if deny_principal is not None:
            principals.append((f"User:{deny_principal}", deny_host or "*", AclPermissionType.DENY))
        ops = {}
        for rtype, name in resources:
            wanted = []
            if operation is not None:
                wanted.append(AclOperation[operation.upper()])
            # kafka-acls.sh --producer: WRITE, DESCRIBE, CREATE on topics; --consumer: READ,
            # DESCRIBE on topics, READ on groups
            if producer and rtype == ResourceType.TOPIC:
                wanted += [AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE]
            if consumer and rtype == ResourceType.TOPIC:
                wanted += [AclOperation.READ, AclOperation.DESCRIBE]
            if consumer and rtype == ResourceType.GROUP:
                wanted += [AclOperation.READ]
            ops[(rtype, name)] = wanted
        return [
            AclBinding(rtype, name, ResourcePatternType.LITERAL, principal, host, op, perm)
            for (rtype, name), wanted in ops.items()
            for principal, host, perm in principals
            for op in wanted
        ]

    def add_acl(self, **acl_params):
        admin = _shoal_admin()  # kept referenced until the futures are done
        results = admin.create_acls(self._bindings(**acl_params), request_timeout=15)
        for fut in results.values():
            fut.result()
        self._active_acls.append(acl_params)

    def remove_acl(self, **acl_params):
        from confluent_kafka.admin import AclBindingFilter

        filters = [
            AclBindingFilter(
                b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                b.permission_type,
            )
            for b in self._bindings(**acl_params)
        ]
        admin = _shoal_admin()
        results = admin.delete_acls(filters, request_timeout=15)
        for fut in results.values():
            fut.result()
        self._active_acls.remove(acl_params)

    def list_acl(self, principal=None):
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
        )

        flt = AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY,
            f"User:{principal}" if principal else None, None, AclOperation.ANY,
            AclPermissionType.ANY,
        )
        admin = _shoal_admin()
        return admin.describe_acls(flt, request_timeout=15).result()

    def cleanup(self):
        for acl_params in self._active_acls[:]:
            self.remove_acl(**acl_params)


class _ShoalKafkaConfig:
    """Their KafkaConfig.add_scram_user (kafka-configs.sh --zookeeper ... --alter --add-config
    'SCRAM-SHA-256=[password=..],SCRAM-SHA-512=[password=..]' --entity-type users) as
    AlterUserScramCredentials requests, one per mechanism: a KRaft controller (and shoal) answers
    DUPLICATE_RESOURCE to two changes of one user in one request (ScramControlManager keys them by
    user name); their ZooKeeper-mode image never sent that request."""

    def add_scram_user(self, username, password):
        from confluent_kafka.admin import (
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = _shoal_admin()
        for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
            upsertion = UserScramCredentialUpsertion(
                username, ScramCredentialInfo(mech, 4096), password.encode()
            )
            results = admin.alter_user_scram_credentials([upsertion], request_timeout=15)
            for fut in results.values():
                fut.result()


@_pytest.fixture(scope="session")
def docker(request):  # noqa: F811
    yield None


@_pytest.fixture(scope="session")
def kafka_image(request):  # noqa: F811
    return request.config.getoption("--docker-image")


@_pytest.fixture(scope="session")
def ssl_folder():  # noqa: F811
    return _pathlib.Path("tests/ssl_cert")


@_pytest.fixture(scope="session")
def kafka_server(kafka_image):  # noqa: F811
    yield _ShoalKafkaServer()


def _shoal_acls_tool_manager(tool):
    """With SHOAL_ACLS_TOOL=<path to shoal>: their own ACLManager (its kafka-acls.sh options), its
    command run as `shoal acls` against the SASL_PLAINTEXT listener as admin instead of
    `docker exec ... kafka-acls.sh --authorizer-properties zookeeper.connect=...`."""
    import shlex
    import subprocess
    import tempfile

    from tests._testutil import ACLManager

    conf = tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False)
    conf.write(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required"
        ' username="admin" password="admin";\n'
    )
    conf.close()
    bootstrap = f"{_os.environ['SHOAL_HOST']}:{_os.environ['SHOAL_SASL_PLAIN_PORT']}"

    class _ToolACLManager(ACLManager):
        def _exec(self, *cmd_options):
            cmd = [tool, "acls", "--bootstrap-server", bootstrap, "--command-config", conf.name,
                   "--force"]
            for opt in cmd_options:
                cmd += shlex.split(opt)
            proc = subprocess.run(cmd, capture_output=True)
            if proc.returncode != 0:
                raise RuntimeError(f"Failed to apply ACL: {proc.stderr.decode()}")
            return proc.stdout

    return _ToolACLManager(None, None)


@_pytest.fixture(scope="class")
def acl_manager():  # noqa: F811
    tool = _os.environ.get("SHOAL_ACLS_TOOL")
    return _shoal_acls_tool_manager(tool) if tool else _ShoalACLManager()


@_pytest.fixture(scope="class")
def kafka_config():  # noqa: F811
    return _ShoalKafkaConfig()


@_pytest.fixture(scope="class")
def kerberos_utils():  # noqa: F811
    # Kerberos (GSSAPI) is not served by shoal: the GSSAPI tests fail at kinit
    class _NoKerberos:
        def kinit(self, *a, **k):
            raise RuntimeError("GSSAPI (Kerberos) is not served by shoal")

        def kdestroy(self, *a, **k):
            pass

    return _NoKerberos()
