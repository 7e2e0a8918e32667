# Appended to confluent-kafka-python's tests/integration/conftest.py (v2.15.0) so that the
# `sasl_cluster` fixture (test_describe_operations) uses a running broker instead of the trivup
# cluster the suite downloads Kafka for. Later definitions in a module replace earlier ones.
# The broker stands in for trivup's SASL cluster: a SASL_PLAINTEXT listener with PLAIN user
# sasl_user/sasl_user (trivup's sasl_users), an authorizer with allow.everyone.if.no.acl.found=true
# and sasl_user not a super user (the test expects every operation to be authorized until it
# creates an ALLOW ACL for User:sasl_user). Named by SASL_BROKERS (host:port of that listener).
# See docs/compatibility.md ("Security against the clients' own suites") for the commands.
import os as _os

import pytest as _pytest
from tests.integration.cluster_fixture import ByoFixture as _ByoFixture


@_pytest.fixture(scope="session")
def sasl_cluster(request):  # noqa: F811
    cluster = _ByoFixture(
        {
            "bootstrap.servers": _os.environ["SASL_BROKERS"],
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "sasl_user",
            "sasl.password": "sasl_user",
        }
    )
    try:
        yield cluster
    finally:
        cluster.stop()
