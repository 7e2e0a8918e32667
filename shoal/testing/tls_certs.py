"""Throwaway TLS certificates for tests: a CA, a server certificate, client certificates.

A secured test broker needs a key store and a trust store; these are written as PEM files (what
shoal's `ssl.keystore.type=PEM` reads and what Python and librdkafka clients take). Needs the
`cryptography` package (in shoal's test extra); nothing here is meant for production keys.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Pki:
    """Where the files are. ``server_pem`` holds the server's key and chain (a PEM key store)."""

    directory: Path
    ca_cert: Path
    server_pem: Path
    server_cert: Path
    server_key: Path
    clients: dict[str, tuple[Path, Path]] = field(default_factory=dict)  # name -> (cert, key)

    def broker_properties(self, listener: str, client_auth: str = "none") -> dict[str, str]:
        """The ssl.* properties of a TLS listener using these files (Kafka's names)."""
        prefix = f"listener.name.{listener.lower()}."
        return {prefix + "ssl.keystore.type": "PEM", prefix + "ssl.keystore.location": str(self.server_pem),
                prefix + "ssl.truststore.type": "PEM", prefix + "ssl.truststore.location": str(self.ca_cert),
                prefix + "ssl.client.auth": client_auth}


def _crypto() -> Any:
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:  # pragma: no cover - the test extra installs it
        raise RuntimeError("shoal.testing.tls_certs needs the 'cryptography' package "
                           "(pip install 'shoal[test]')") from None
    return x509, hashes, serialization, ec, ExtendedKeyUsageOID, NameOID


def _name(subject: dict[str, str]) -> Any:
    x509, _, _, _, _, name_oid = _crypto()
    oids = {"CN": name_oid.COMMON_NAME, "O": name_oid.ORGANIZATION_NAME, "OU": name_oid.ORGANIZATIONAL_UNIT_NAME,
            "C": name_oid.COUNTRY_NAME, "L": name_oid.LOCALITY_NAME, "ST": name_oid.STATE_OR_PROVINCE_NAME}
    return x509.Name([x509.NameAttribute(oids[k], v) for k, v in subject.items()])


def _issue(subject: dict[str, str], issuer: Any, issuer_key: Any, key: Any, *, ca: bool = False,
           server: bool = False, days: int = 30) -> Any:
    x509, hashes, _, _, eku, _ = _crypto()
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if server:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage([eku.SERVER_AUTH]), critical=False)
    elif not ca:
        builder = builder.add_extension(x509.ExtendedKeyUsage([eku.CLIENT_AUTH]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(directory: str | Path, clients: dict[str, dict[str, str]] | None = None,
             ca_subject: dict[str, str] | None = None) -> Pki:
    """A CA, a server certificate for localhost/127.0.0.1, and one client certificate per entry
    of ``clients`` (name -> subject such as {"CN": "alice", "O": "shoal"}), as PEM files."""
    x509, _, serialization, ec, _, _ = _crypto()
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM

    def key_pem(key: Any) -> bytes:
        return key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(ca_subject or {"CN": "shoal test CA"})
    ca = _issue(ca_subject or {"CN": "shoal test CA"}, ca_name, ca_key, ca_key, ca=True)
    (out / "ca.pem").write_bytes(ca.public_bytes(pem))
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _issue({"CN": "localhost"}, ca_name, ca_key, server_key, server=True)
    (out / "server.crt").write_bytes(server.public_bytes(pem))
    (out / "server.key").write_bytes(key_pem(server_key))
    (out / "server.pem").write_bytes(key_pem(server_key) + server.public_bytes(pem))
    pki = Pki(out, out / "ca.pem", out / "server.pem", out / "server.crt", out / "server.key")
    for name, subject in (clients or {}).items():
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _issue(subject, ca_name, ca_key, key)
        (out / f"{name}.crt").write_bytes(cert.public_bytes(pem))
        (out / f"{name}.key").write_bytes(key_pem(key))
        pki.clients[name] = (out / f"{name}.crt", out / f"{name}.key")
    return pki
