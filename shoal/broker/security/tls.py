"""TLS for SSL and SASL_SSL listeners: a server `ssl.SSLContext` from Kafka's ssl.* properties.

shoal reads PEM key and trust stores (`ssl.keystore.type=PEM`), from files (`*.location`) or
inline (`ssl.keystore.key` with `ssl.keystore.certificate.chain`, `ssl.truststore.certificates`).
Java's JKS and PKCS12 stores need the JVM's tooling: shoal refuses them with a clear error rather
than serving without TLS. Each property can be set for one listener
(`listener.name.<name>.ssl.keystore.location`).
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING

from shoal.broker.config import ConfigError
from shoal.broker.security.listeners import SecurityProtocol, listener_property, protocol_map

if TYPE_CHECKING:
    from shoal.broker.config import BrokerConfig

TLS_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
# Java (IANA) cipher suite names, piece by piece, as OpenSSL spells them.
_KX = {"ECDHE_RSA": "ECDHE-RSA-", "ECDHE_ECDSA": "ECDHE-ECDSA-", "DHE_RSA": "DHE-RSA-", "RSA": ""}
_CIPHER = {"AES_128_GCM": "AES128-GCM", "AES_256_GCM": "AES256-GCM", "CHACHA20_POLY1305": "CHACHA20-POLY1305",
           "AES_128_CBC": "AES128", "AES_256_CBC": "AES256"}


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The TLS context of ``listener``; ConfigError names the property that is wrong."""
    def prop(key: str) -> str:
        return listener_property(config, listener, key).strip()

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_versions(ctx, prop("ssl.enabled.protocols"))
    _load_keystore(ctx, prop)
    auth = _client_auth(config, listener).lower()
    if auth not in _CLIENT_AUTH:
        raise ConfigError(f"ssl.client.auth: {auth!r} is not one of none, requested, required")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    _load_truststore(ctx, prop, needed=auth != "none")
    ciphers = [c.strip() for c in prop("ssl.cipher.suites").split(",") if c.strip()]
    if ciphers:
        _set_ciphers(ctx, ciphers)
    return ctx


def _client_auth(config: BrokerConfig, listener: str) -> str:
    """`ssl.client.auth` of a listener. As Kafka (KIP-684), the broker-wide value applies to SSL
    listeners only: a SASL_SSL listener asks for client certificates only when its own
    `listener.name.<name>.ssl.client.auth` says so (its clients authenticate with SASL)."""
    prefixed = f"listener.name.{listener.lower()}.ssl.client.auth"
    if prefixed in config.props:
        return config.get(prefixed).strip()
    protocols = protocol_map(config)
    return config.get("ssl.client.auth").strip() if protocols.get(listener.upper()) != SecurityProtocol.SASL_SSL \
        else "none"


def _set_versions(ctx: ssl.SSLContext, enabled: str) -> None:
    names = [v.strip() for v in enabled.split(",") if v.strip()]
    unknown = [n for n in names if n not in TLS_VERSIONS]
    if unknown or not names:
        raise ConfigError(f"ssl.enabled.protocols: unsupported protocol(s) {unknown or enabled!r} "
                          f"(known: {', '.join(TLS_VERSIONS)})")
    versions = sorted(TLS_VERSIONS[n] for n in names)
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]


def _load_keystore(ctx: ssl.SSLContext, prop: Callable[[str], str]) -> None:
    kind = prop("ssl.keystore.type").upper()
    location, inline_key = prop("ssl.keystore.location"), prop("ssl.keystore.key")
    key_password = prop("ssl.key.password") or prop("ssl.keystore.password") or None
    if inline_key:
        chain = prop("ssl.keystore.certificate.chain")
        if not chain:
            raise ConfigError("ssl.keystore.key is set without ssl.keystore.certificate.chain")
        # ssl only loads keys from files: a private (0600) file that lives for this call
        fd, path = tempfile.mkstemp(suffix=".pem")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(inline_key.replace("\\n", "\n") + "\n" + chain.replace("\\n", "\n") + "\n")
            _load_chain(ctx, path, key_password)
        finally:
            os.unlink(path)
        return
    if not location:
        raise ConfigError("a TLS listener needs ssl.keystore.location (or ssl.keystore.key and "
                          "ssl.keystore.certificate.chain)")
    if kind != "PEM":
        raise ConfigError(f"ssl.keystore.type {kind}: shoal reads PEM stores only (ssl.keystore.type=PEM)")
    _load_chain(ctx, location, key_password)


def _load_chain(ctx: ssl.SSLContext, path: str, password: str | None) -> None:
    try:
        ctx.load_cert_chain(path, password=password)
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"ssl.keystore: cannot load the key and certificate chain: {e}") from None


def _load_truststore(ctx: ssl.SSLContext, prop: Callable[[str], str], needed: bool) -> None:
    location, inline = prop("ssl.truststore.location"), prop("ssl.truststore.certificates")
    try:
        if inline:
            ctx.load_verify_locations(cadata=inline.replace("\\n", "\n"))
        elif location:
            if prop("ssl.truststore.type").upper() != "PEM":
                raise ConfigError(f"ssl.truststore.type {prop('ssl.truststore.type')}: shoal reads PEM stores "
                                  "only (ssl.truststore.type=PEM)")
            ctx.load_verify_locations(cafile=location)
        elif needed:
            raise ConfigError("ssl.client.auth asks for client certificates but no truststore is set "
                              "(ssl.truststore.location or ssl.truststore.certificates)")
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"ssl.truststore: cannot load the certificates: {e}") from None


def openssl_cipher(java_name: str) -> str | None:
    """OpenSSL's name for a Java cipher suite name; None for a TLS 1.3 suite (always enabled)."""
    name = java_name.upper()
    if name.startswith("TLS_") and "_WITH_" not in name:
        return None  # TLS 1.3: Python's ssl cannot narrow them
    kx, _, rest = name.removeprefix("TLS_").removeprefix("SSL_").partition("_WITH_")
    for cipher, spelled in _CIPHER.items():
        mac = rest.removeprefix(cipher + "_")
        if kx in _KX and mac != rest and mac in ("SHA256", "SHA384", "SHA"):
            # ECDHE-RSA-AES128-GCM-SHA256, AES128-SHA, ECDHE-RSA-CHACHA20-POLY1305 (no MAC named)
            return _KX[kx] + spelled + ("" if cipher == "CHACHA20_POLY1305" else "-" + mac)
    raise ConfigError(f"ssl.cipher.suites: unknown cipher suite {java_name}")


def _set_ciphers(ctx: ssl.SSLContext, names: list[str]) -> None:
    openssl = [n for n in (openssl_cipher(c) for c in names) if n]
    if openssl:
        try:
            ctx.set_ciphers(":".join(openssl))
        except ssl.SSLError:
            raise ConfigError(f"ssl.cipher.suites: none of {', '.join(names)} can be used") from None
