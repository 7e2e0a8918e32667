"""A secured listener for test brokers: the pytest plugin's ``--shoal-security`` option.

The broker keeps its PLAINTEXT listener first (for set-up) and gets a second one speaking the chosen
protocol: SASL_PLAINTEXT, SASL_SSL or SSL. SASL users: ``shoal`` / ``shoal-secret`` for PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512 (the SCRAM credentials are made over the wire once the broker
runs). TLS: a CA and certificates made for the session (`shoal.testing.tls_certs`), with a client
certificate for SSL listeners (``ssl.client.auth=required``, principal ``User:CN=shoal-client``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL", "SSL")
USER, PASSWORD = "shoal", "shoal-secret"
_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
         f'username="{USER}" password="{PASSWORD}" user_{USER}="{PASSWORD}";')


@dataclass
class Security:
    """How a client reaches the secured listener: ``client_properties()`` gives Kafka's client
    properties (what shoal's client and Kafka's Java client take); the fields serve other clients."""

    protocol: str
    bootstrap_servers: str = ""
    username: str = USER
    password: str = PASSWORD
    mechanism: str = "SCRAM-SHA-256"
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    broker_properties: dict[str, str] = field(default_factory=dict)

    def client_properties(self) -> dict[str, str]:
        props = {"bootstrap.servers": self.bootstrap_servers, "security.protocol": self.protocol}
        if "SASL" in self.protocol:
            module = "plain.PlainLoginModule" if self.mechanism == "PLAIN" else "scram.ScramLoginModule"
            props.update({"sasl.mechanism": self.mechanism, "sasl.jaas.config":
                          f'org.apache.kafka.common.security.{module} required username="{self.username}" '
                          f'password="{self.password}";'})
        if self.ca_file is not None:
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca_file)})
        if self.cert_file is not None and self.key_file is not None:
            props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.cert_file.with_suffix(".pem"))})
        return props


def prepare(protocol: str, directory: Path) -> Security:
    """The broker properties (and certificates) for a secured listener named after ``protocol``."""
    protocol = protocol.upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"shoal security: {protocol!r} is not one of {', '.join(PROTOCOLS)}")
    props = {"listeners": f"PLAINTEXT://127.0.0.1:0,{protocol}://127.0.0.1:0"}
    security = Security(protocol)
    if "SASL" in protocol:
        props.update({"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                      f"listener.name.{protocol.lower()}.plain.sasl.jaas.config": _JAAS})
    if "SSL" in protocol:
        from shoal.testing.tls_certs import make_pki

        pki = make_pki(directory, clients={"client": {"CN": "shoal-client"}})
        auth = "required" if protocol == "SSL" else "none"
        props.update(pki.broker_properties(protocol, client_auth=auth))
        security.ca_file = pki.ca_cert
        if protocol == "SSL":
            security.cert_file, security.key_file = pki.clients["client"]
            # a PEM key store for clients that take one file (Kafka's ssl.keystore.location)
            pem = security.cert_file.with_suffix(".pem")
            pem.write_bytes(security.key_file.read_bytes() + security.cert_file.read_bytes())
    security.broker_properties = props
    return security


def add_scram_users(admin_bootstrap: str) -> None:
    """Give the test user SCRAM-SHA-256 and -512 credentials (over the PLAINTEXT listener)."""
    import os

    from shoal.broker.security.scram import salted_password
    from shoal.protocol.generated.alter_user_scram_credentials_request import AlterUserScramCredentialsRequest
    from shoal.tools.wire import ToolClient

    salt = os.urandom(16)
    Req = AlterUserScramCredentialsRequest
    with ToolClient(admin_bootstrap, timeout=10.0) as client:
        for code, name in ((1, "SCRAM-SHA-256"), (2, "SCRAM-SHA-512")):  # Kafka: one change per user per request
            request = Req(deletions=[], upsertions=[Req.ScramCredentialUpsertion(
                name=USER, mechanism=code, iterations=4096, salt=salt,
                salted_password=salted_password(name, PASSWORD, salt, 4096))])
            response: Any = client.node(client.all_nodes()[0]).send(request)
            errors = [r.error_message for r in response.results if r.error_code]
            if errors:
                raise RuntimeError(f"could not make the SCRAM test user: {errors}")
