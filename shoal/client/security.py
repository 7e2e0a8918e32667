"""The client side of Kafka's security: TLS contexts and the configuration of SASL.

Settings use the Java client's property names: ``security.protocol`` (PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL), the ``ssl.*`` key and trust stores (PEM only: files or inline values), and
``sasl.mechanism`` with ``sasl.jaas.config`` holding the credentials as a JAAS login module entry
(the mechanisms themselves: sasl_mechanisms.py).

Kafka's client reports configuration mistakes as ConfigException when the client is built; here they
are :class:`SecurityConfigError` (a ValueError), raised by :func:`client_security`.
"""

from __future__ import annotations

import os
import ssl
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shoal.broker.security.tls import TLS_VERSIONS  # Kafka's protocol names, shared with the broker

from .sasl_mechanisms import (
    GSSAPI,
    OAUTHBEARER,
    PLAIN,
    SASL_MECHANISMS,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    UNSECURED,
    OAuthBearerClient,
    PlainClient,
    SaslMechanismClient,
    ScramClient,
    SecurityConfigError,
    token_from_file_url,
    unsecured_token,
    validate_extensions,
)

__all__ = ["SECURITY_KEYS", "ClientSecurity", "SecurityConfigError", "build_security", "client_security",
           "reauthentication_delay_ms", "ssl_context", "validate_security"]

PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL = "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)

_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_MODULE_FOR = {PLAIN: _PLAIN_MODULE, SCRAM_SHA_256: _SCRAM_MODULE, SCRAM_SHA_512: _SCRAM_MODULE,
               OAUTHBEARER: _OAUTH_MODULE}

# The configuration keys that shape a connection's security (the cache key of client_security).
SECURITY_KEYS = (
    "security.protocol", "sasl.mechanism", "sasl.jaas.config", "sasl.oauthbearer.token.endpoint.url",
    "ssl.protocol", "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm", "ssl.cipher.suites",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.certificates",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.key.password",
)


# -- configuration -------------------------------------------------------------------------


@dataclass(frozen=True)
class ClientSecurity:
    """How to secure every connection of a client, built once from its configuration."""

    protocol: str = PLAINTEXT
    ssl_context: ssl.SSLContext | None = None
    check_hostname: bool = True
    mechanism: str | None = None
    _new_client: Callable[[], SaslMechanismClient] | None = field(default=None, repr=False)

    @property
    def uses_tls(self) -> bool:
        return self.ssl_context is not None

    @property
    def uses_sasl(self) -> bool:
        return self._new_client is not None

    def sasl_client(self) -> SaslMechanismClient:
        """A fresh mechanism client (one per authentication and re-authentication)."""
        if self._new_client is None:
            raise SecurityConfigError(f"security.protocol {self.protocol} does not use SASL")
        return self._new_client()

    def server_hostname(self, host: str) -> str | None:
        """The name TLS checks the broker's certificate against (and sends as SNI)."""
        return host if self.ssl_context is not None else None


def _text(config: Mapping[str, Any], key: str) -> str:
    value = config.get(key)
    if value is None:
        return ""
    return str(value).strip()


def _parse_protocol(config: Mapping[str, Any]) -> str:
    raw = _text(config, "security.protocol") or PLAINTEXT
    protocol = raw.upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise SecurityConfigError(
            f"Invalid value {raw} for configuration security.protocol: String must be one of: "
            f"{', '.join(SECURITY_PROTOCOLS)}")
    return protocol


def _set_tls_versions(ctx: ssl.SSLContext, config: Mapping[str, Any]) -> None:
    enabled_text = _text(config, "ssl.enabled.protocols") or "TLSv1.2,TLSv1.3"
    names = [v.strip() for v in enabled_text.split(",") if v.strip()]
    unknown = [n for n in names if n not in TLS_VERSIONS]
    if unknown or not names:
        raise SecurityConfigError(f"ssl.enabled.protocols: unsupported protocol(s) {', '.join(unknown) or '(none)'} "
                                  f"(known: {', '.join(TLS_VERSIONS)})")
    versions = sorted(TLS_VERSIONS[n] for n in names)
    low, high = versions[0], versions[-1]
    # ssl.protocol names the SSLContext Java creates: a TLSv1.x one speaks nothing newer.
    proto = _text(config, "ssl.protocol") or "TLSv1.3"
    if proto in TLS_VERSIONS:
        high = min(high, TLS_VERSIONS[proto])
    elif proto.upper() not in ("TLS", "SSL"):
        raise SecurityConfigError(f"ssl.protocol: unsupported protocol {proto} (known: TLS, "
                                  f"{', '.join(TLS_VERSIONS)})")
    if high < low:
        raise SecurityConfigError(f"ssl.protocol {proto} is older than every protocol of ssl.enabled.protocols "
                                  f"({enabled_text})")
    try:
        ctx.minimum_version, ctx.maximum_version = low, high
    except ValueError as e:  # pragma: no cover - an OpenSSL build without that version
        raise SecurityConfigError(f"ssl.enabled.protocols: {e}") from None


def _pem(value: str) -> str:
    # Inline PEM in a properties file often has its line breaks written as "\n".
    return value.replace("\\n", "\n")


def _load_truststore(ctx: ssl.SSLContext, config: Mapping[str, Any]) -> None:
    kind = (_text(config, "ssl.truststore.type") or "JKS").upper()
    location, inline = _text(config, "ssl.truststore.location"), _text(config, "ssl.truststore.certificates")
    password = _text(config, "ssl.truststore.password")
    try:
        if inline:
            if kind != "PEM":
                raise SecurityConfigError(f"SSL trust store certs can be specified only for PEM, but trust store "
                                          f"type is {kind}.")
            if location:
                raise SecurityConfigError("Both SSL trust store location and separate trust certificates are "
                                          "specified.")
            if password:
                raise SecurityConfigError("SSL trust store password cannot be specified for PEM format.")
            ctx.load_verify_locations(cadata=_pem(inline))
        elif location:
            if kind != "PEM":
                raise SecurityConfigError(
                    f"ssl.truststore.type {kind}: shoal's client reads PEM trust stores only; export the CA "
                    f"certificates as PEM and set ssl.truststore.type=PEM")
            if password:
                raise SecurityConfigError("SSL trust store password cannot be specified for PEM format.")
            ctx.load_verify_locations(cafile=location)
        elif password:
            raise SecurityConfigError("SSL trust store is not specified, but trust store password is specified.")
        else:
            ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)  # as Java falls back on the JVM's CAs
    except (ssl.SSLError, OSError) as e:
        raise SecurityConfigError(f"Invalid PEM truststore configs: {e}") from None


def _load_keystore(ctx: ssl.SSLContext, config: Mapping[str, Any]) -> None:
    kind = (_text(config, "ssl.keystore.type") or "JKS").upper()
    location, key = _text(config, "ssl.keystore.location"), _text(config, "ssl.keystore.key")
    chain, password = _text(config, "ssl.keystore.certificate.chain"), _text(config, "ssl.keystore.password")
    key_password = _text(config, "ssl.key.password") or None
    if key:
        if kind != "PEM":
            raise SecurityConfigError(f"SSL private key can be specified only for PEM, but key store type is {kind}.")
        if not chain:
            raise SecurityConfigError("SSL private key is specified, but certificate chain is not specified.")
        if location:
            raise SecurityConfigError("Both SSL key store location and separate private key are specified.")
        if password:
            raise SecurityConfigError("SSL key store password cannot be specified with PEM format, only key "
                                      "password may be specified.")
        # ssl loads keys from files only: a private (0600) file that lives for this call.
        fd, path = tempfile.mkstemp(suffix=".pem")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(_pem(key) + "\n" + _pem(chain) + "\n")
            _load_chain(ctx, path, key_password, "Invalid PEM keystore configs")
        finally:
            os.unlink(path)
    elif chain:
        raise SecurityConfigError("SSL certificate chain is specified, but private key is not specified")
    elif location:
        if kind != "PEM":
            raise SecurityConfigError(
                f"ssl.keystore.type {kind}: shoal's client reads PEM key stores only; put the private key and "
                f"certificate chain in a PEM file and set ssl.keystore.type=PEM")
        if password:
            raise SecurityConfigError("SSL key store password cannot be specified with PEM format, only key "
                                      "password may be specified")
        _load_chain(ctx, location, key_password, f"Failed to load PEM SSL keystore {location}")
    elif password:
        raise SecurityConfigError("SSL key store is not specified, but key store password is specified.")


def _load_chain(ctx: ssl.SSLContext, path: str, password: str | None, what: str) -> None:
    try:
        ctx.load_cert_chain(path, password=password)
    except (ssl.SSLError, OSError) as e:
        raise SecurityConfigError(f"{what}: {e}") from None


def _set_ciphers(ctx: ssl.SSLContext, config: Mapping[str, Any]) -> None:
    names = [c.strip() for c in _text(config, "ssl.cipher.suites").split(",") if c.strip()]
    if not names:
        return
    from shoal.broker.security.tls import openssl_cipher  # Java names -> OpenSSL names

    try:
        openssl = [n for n in (openssl_cipher(c) for c in names) if n]
    except ValueError as e:  # the broker's ConfigError is a ValueError
        raise SecurityConfigError(str(e)) from None
    if openssl:
        try:
            ctx.set_ciphers(":".join(openssl))
        except ssl.SSLError:
            raise SecurityConfigError(f"ssl.cipher.suites: none of {', '.join(names)} can be used") from None


def ssl_context(config: Mapping[str, Any]) -> tuple[ssl.SSLContext, bool]:
    """The client TLS context for Kafka's ssl.* settings, and whether it checks the host name."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    algorithm = _text(config, "ssl.endpoint.identification.algorithm").lower() \
        if config.get("ssl.endpoint.identification.algorithm") is not None else "https"
    if algorithm not in ("https", ""):
        raise SecurityConfigError(f"ssl.endpoint.identification.algorithm {algorithm}: shoal's client knows "
                                  "'https' (check the broker's host name) and '' (no check)")
    check_hostname = algorithm == "https"
    ctx.check_hostname = check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED  # Java checks the chain even without host name verification
    _set_tls_versions(ctx, config)
    _load_truststore(ctx, config)
    _load_keystore(ctx, config)
    _set_ciphers(ctx, config)
    return ctx, check_hostname


def _jaas_entry(config: Mapping[str, Any], mechanism: str) -> dict[str, str]:
    from shoal.broker.security.jaas import JaasConfigError, parse_jaas_config

    text = _text(config, "sasl.jaas.config")
    module = _MODULE_FOR[mechanism]
    if not text:
        if mechanism == OAUTHBEARER:
            return {}
        raise SecurityConfigError(
            f"sasl.mechanism {mechanism} needs credentials: set sasl.jaas.config to "
            f'"{module} required username=\\"...\\" password=\\"...\\";"')
    try:
        entries = parse_jaas_config(text)
    except JaasConfigError as e:
        raise SecurityConfigError(f"sasl.jaas.config: {e}") from None
    if len(entries) != 1:
        # Kafka's JaasContext for a client: exactly one login module.
        raise SecurityConfigError(f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    entry = entries[0]
    if entry.login_module != module:
        raise SecurityConfigError(f"sasl.jaas.config: sasl.mechanism {mechanism} needs the login module {module}, "
                                  f"not {entry.login_module}")
    return dict(entry.options)


def _credential(options: Mapping[str, str], name: str, mechanism: str) -> str:
    value = options.get(name)
    if value is None:
        raise SecurityConfigError(f"sasl.jaas.config: the {mechanism} login module needs the '{name}' option")
    return value


def _sasl_factory(config: Mapping[str, Any], mechanism: str) -> Callable[[], SaslMechanismClient]:
    options = _jaas_entry(config, mechanism)
    if mechanism == PLAIN:
        user, password = _credential(options, "username", PLAIN), _credential(options, "password", PLAIN)
        return lambda: PlainClient(user, password)
    if mechanism in (SCRAM_SHA_256, SCRAM_SHA_512):
        user, password = _credential(options, "username", mechanism), _credential(options, "password", mechanism)
        extensions = {"tokenauth": "true"} if options.get("tokenauth", "").lower() == "true" else {}
        return lambda: ScramClient(mechanism, user, password, extensions=extensions)
    # OAUTHBEARER
    extensions = {k[len(UNSECURED + "Extension_"):]: v for k, v in options.items()
                  if k.startswith(UNSECURED + "Extension_")}
    validate_extensions(extensions)
    url = _text(config, "sasl.oauthbearer.token.endpoint.url")
    if url:
        token_from_file_url(url)  # fail now, at construction, if it cannot be read
        return lambda: OAuthBearerClient(token_from_file_url(url), extensions)
    if not any(k.startswith(UNSECURED) and not k.startswith(UNSECURED + "Extension_") for k in options):
        raise SecurityConfigError(
            "OAUTHBEARER needs a token: set unsecuredLoginStringClaim_sub (an unsecured token) in "
            "sasl.jaas.config, or sasl.oauthbearer.token.endpoint.url to a file: URL holding a token")
    unsecured_token(options)  # check the options now; a fresh token for each authentication
    return lambda: OAuthBearerClient(unsecured_token(options), extensions)


def build_security(config: Mapping[str, Any]) -> ClientSecurity:
    """Validate the security settings and build what connections need (no caching)."""
    protocol = _parse_protocol(config)
    ctx, check_hostname = (None, True)
    if protocol in (SSL, SASL_SSL):
        ctx, check_hostname = ssl_context(config)
    if protocol not in (SASL_PLAINTEXT, SASL_SSL):
        return ClientSecurity(protocol, ctx, check_hostname)
    raw = _text(config, "sasl.mechanism") or GSSAPI
    mechanism = raw.upper()
    if mechanism == GSSAPI:
        raise SecurityConfigError(
            f"sasl.mechanism GSSAPI (Kafka's default) is Kerberos, which shoal's client does not do: with "
            f"security.protocol={protocol} set sasl.mechanism to one of {', '.join(SASL_MECHANISMS)}")
    if mechanism not in SASL_MECHANISMS:
        raise SecurityConfigError(f"sasl.mechanism {raw}: shoal's client supports {', '.join(SASL_MECHANISMS)}")
    return ClientSecurity(protocol, ctx, check_hostname, mechanism, _sasl_factory(config, mechanism))


_cache: dict[tuple, ClientSecurity] = {}
_cache_lock = threading.Lock()
_CACHE_SIZE = 64


def client_security(config: Mapping[str, Any]) -> ClientSecurity:
    """:func:`build_security`, remembered per distinct set of security settings (a TLS context
    loads its files once, as Java's client does when it is built)."""
    key = tuple(repr(config.get(k)) for k in SECURITY_KEYS)
    with _cache_lock:
        found = _cache.get(key)
    if found is not None:
        return found
    built = build_security(config)
    with _cache_lock:
        if len(_cache) >= _CACHE_SIZE:
            _cache.pop(next(iter(_cache)))
        _cache[key] = built
    return built


def validate_security(config: Mapping[str, Any]) -> None:
    """Raise SecurityConfigError if the security settings cannot be used (at client construction)."""
    client_security(config)


def reauthentication_delay_ms(session_lifetime_ms: int) -> int:
    """When to re-authenticate (KIP-368): at 90% of the session's lifetime (Java picks at random
    between 85% and 95%; a fixed point keeps the client deterministic)."""
    return max(1, int(session_lifetime_ms * 0.9))
