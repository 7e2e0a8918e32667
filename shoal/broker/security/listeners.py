"""Named listeners, their security protocols and their per-listener properties.

As Kafka: `listeners=PLAINTEXT://:9092,SASL_SSL://:9093`, each name mapped to a security protocol
by `listener.security.protocol.map` (a name that is itself a protocol needs no entry), and any
property overridden for one listener as `listener.name.<name>.<property>` (the name in lower
case; SASL's JAAS config per mechanism as `listener.name.<name>.<mechanism>.sasl.jaas.config`).
Listeners named in `controller.listener.names` belong to a KRaft controller, which shoal does not
run: they are skipped, so a Kafka combined-mode server.properties starts shoal unchanged.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from shoal.broker.config import ConfigError, Listener
from shoal.broker.security.authentication import SaslListener
from shoal.broker.security.jaas import JaasConfigError, parse_listener_jaas_config, plain_users
from shoal.broker.security.oauth_tokens import OAuthConfigError, OAuthSettings
from shoal.broker.security.principal import PrincipalMapper
from shoal.broker.security.sasl_server import OAUTHBEARER, PLAIN, SUPPORTED_MECHANISMS, MechanismSettings

if TYPE_CHECKING:
    from shoal.broker.config import BrokerConfig
    from shoal.broker.security.scram import ScramCredential


class SecurityProtocol(Enum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"

    @property
    def uses_tls(self) -> bool:
        return self in (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)

    @property
    def uses_sasl(self) -> bool:
        return self in (SecurityProtocol.SASL_PLAINTEXT, SecurityProtocol.SASL_SSL)


@dataclass(frozen=True)
class ListenerSpec:
    """One listener as configured: where it binds, what it advertises, how it is secured."""

    name: str
    protocol: SecurityProtocol
    host: str
    port: int
    advertised_host: str
    advertised_port: int | None  # None: the port it binds (an ephemeral port once known)


def protocol_map(config: BrokerConfig) -> dict[str, SecurityProtocol]:
    out: dict[str, SecurityProtocol] = {}
    for item in config.get("listener.security.protocol.map").split(","):
        if not item.strip():
            continue
        name, _, proto = item.partition(":")
        try:
            out[name.strip().upper()] = SecurityProtocol(proto.strip().upper())
        except ValueError:
            raise ConfigError(f"listener.security.protocol.map: unknown security protocol {proto.strip()!r} "
                              f"for listener {name.strip()}") from None
    return out


def listener_specs(config: BrokerConfig) -> list[ListenerSpec]:
    """The listeners this broker serves, in the order `listeners` gives them."""
    protocols = protocol_map(config)
    controllers = {n.strip().upper() for n in config.get("controller.listener.names").split(",") if n.strip()}
    advertised = {a.name.upper(): a for a in config.advertised_listeners}
    specs: list[ListenerSpec] = []
    for listener in config.listeners:
        name = listener.name.upper()
        if name in controllers:
            continue
        if name not in protocols:
            raise ConfigError(f"listeners: no security protocol defined for listener {listener.name} "
                              f"(listener.security.protocol.map)")
        if any(s.name == name for s in specs):
            raise ConfigError(f"listeners: listener name {listener.name} is used twice")
        ad: Listener = advertised.get(name, listener)
        specs.append(ListenerSpec(name, protocols[name], listener.host, listener.port,
                                  ad.host if ad.host != "0.0.0.0" else listener.host,
                                  ad.port if ad.port and ad != listener else None))
    if not specs:
        raise ConfigError("listeners: no listener left for clients (all are controller listeners)")
    return specs


def listener_property(config: BrokerConfig, listener: str, key: str) -> str:
    """``key`` as set for ``listener`` (listener.name.<name>.<key>), else the broker-wide value."""
    prefixed = f"listener.name.{listener.lower()}.{key}"
    return config.get(prefixed) if prefixed in config.props else config.get(key)


@dataclass(frozen=True)
class ListenerSecurity:
    """How connections to one listener are secured (the same on every node)."""

    spec: ListenerSpec
    ssl_context: ssl.SSLContext | None
    sasl: SaslListener | None
    principal_mapper: PrincipalMapper


def listener_security(config: BrokerConfig, spec: ListenerSpec,
                      scram_credential: Callable[[str, str], ScramCredential | None]) -> ListenerSecurity:
    """Build a listener's TLS context and SASL settings; ConfigError says what is wrong."""
    from shoal.broker.security.tls import server_context  # ssl setup only for TLS listeners

    def prop(key: str) -> str:
        return listener_property(config, spec.name, key)

    try:
        mapper = PrincipalMapper(prop("ssl.principal.mapping.rules"))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    ssl_context = server_context(config, spec.name) if spec.protocol.uses_tls else None
    sasl = None
    if spec.protocol.uses_sasl:
        mechanisms = [m.strip().upper() for m in prop("sasl.enabled.mechanisms").split(",") if m.strip()]
        unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if unsupported or not mechanisms:
            raise ConfigError(f"sasl.enabled.mechanisms of listener {spec.name}: shoal serves "
                              f"{', '.join(SUPPORTED_MECHANISMS)}, not {', '.join(unsupported) or 'none'}")
        settings = MechanismSettings(plain_users=_plain_users(config, spec.name) if PLAIN in mechanisms else {},
                                     scram_credential=scram_credential,
                                     oauth=_oauth(config, spec.name) if OAUTHBEARER in mechanisms else None)
        sasl = SaslListener(mechanisms, settings, max_reauth_ms=config.get_int("connections.max.reauth.ms"),
                            max_receive_size=config.get_int("sasl.server.max.receive.size"))
    return ListenerSecurity(spec, ssl_context, sasl, mapper)


def mechanism_jaas(config: BrokerConfig, listener: str, mechanism: str) -> str:
    """listener.name.<listener>.<mechanism>.sasl.jaas.config: a listener's JAAS entry for one mechanism."""
    return config.get(f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config").strip()


def _plain_users(config: BrokerConfig, listener: str) -> dict[str, str]:
    text = mechanism_jaas(config, listener, PLAIN)
    if not text:
        raise ConfigError(f"listener {listener} enables PLAIN but sets no users: set "
                          f"listener.name.{listener.lower()}.plain.sasl.jaas.config to a PlainLoginModule "
                          f"entry with user_<name>=\"<password>\" options")
    try:
        return plain_users(parse_listener_jaas_config(text).options)
    except JaasConfigError as e:
        raise ConfigError(f"listener.name.{listener.lower()}.plain.sasl.jaas.config: {e}") from None


def _oauth(config: BrokerConfig, listener: str) -> OAuthSettings:
    """OAUTHBEARER's validator: Kafka's OAuthBearerValidatorCallbackHandler (JWTs checked against a
    JWKS file) when `sasl.oauthbearer.jwks.endpoint.url` is set, else its unsecured default, whose
    options come from the listener's OAuthBearerLoginModule JAAS entry."""
    def prop(key: str) -> str:  # listener.name.<l>.oauthbearer.<key>, listener.name.<l>.<key>, <key>
        prefixed = f"listener.name.{listener.lower()}.oauthbearer.{key}"
        return (config.get(prefixed) if prefixed in config.props else listener_property(config, listener, key)).strip()

    try:
        url = prop("sasl.oauthbearer.jwks.endpoint.url")
        if url:
            return OAuthSettings.for_jwks_file(
                url, expected_audience=prop("sasl.oauthbearer.expected.audience"),
                expected_issuer=prop("sasl.oauthbearer.expected.issuer") or None,
                sub_claim_name=prop("sasl.oauthbearer.sub.claim.name"),
                scope_claim_name=prop("sasl.oauthbearer.scope.claim.name"),
                clock_skew_seconds=int(prop("sasl.oauthbearer.clock.skew.seconds")))
        text = mechanism_jaas(config, listener, OAUTHBEARER)
        options = parse_listener_jaas_config(text).options if text else {}
        return OAuthSettings.from_unsecured_options(options)
    except (OAuthConfigError, JaasConfigError, ValueError) as e:
        raise ConfigError(f"OAUTHBEARER on listener {listener}: {e}") from None
