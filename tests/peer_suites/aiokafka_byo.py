# Appended to aiokafka's tests/conftest.py (v0.14.0) to run its integration tests against a
# running broker instead of a Docker container: later definitions in a module replace earlier
# ones, so these fixtures take the place of the Docker ones. The broker is named by
# SHOAL_BOOTSTRAP (host:port); pass --docker-image aiolibs/kafka:2.13_3.9.0 only so that the
# suite's kafka_versions() checks have a version to compare (nothing is pulled or run).
# See docs/compatibility.md for the commands.
import os as _os
import pathlib as _pathlib

import pytest as _pytest


class _ShoalKafkaServer:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.ssl_port = self.sasl_plain_port = self.sasl_ssl_port = -1
        self.container = None

    @property
    def hosts(self) -> list[str]:
        return [f"{self.host}:{self.port}"]


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
    host, port = _os.environ["SHOAL_BOOTSTRAP"].rsplit(":", 1)
    yield _ShoalKafkaServer(host, int(port))


@_pytest.fixture(scope="class")
def acl_manager():  # noqa: F811
    return None


@_pytest.fixture(scope="class")
def kafka_config():  # noqa: F811
    return None


@_pytest.fixture(scope="class")
def kerberos_utils():  # noqa: F811
    return None
