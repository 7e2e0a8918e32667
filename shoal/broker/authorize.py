"""The authorization stage of request dispatch: one place for the decision.

Every API declares the ACL checks it needs (`Access`, in broker.apis; what a denial does is in
security.api_access). With no `authorizer.class.name` (Kafka's default) there is no authorizer
and every request is allowed, as in Kafka. With Kafka's StandardAuthorizer configured, the
broker's `Authorizer` (security.authorizer) decides over the ACLs of the cluster metadata
(`ClusterMetadata.acls`), with `super.users` and `allow.everyone.if.no.acl.found` read from the
broker's properties.

Handlers ask through the helpers here (`allowed`, `filter_allowed`, `authorized_operations`...),
so that "no authorizer allows everything" and how the principal and host are taken from the
request are decided once.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import TYPE_CHECKING

from shoal.broker.config import STANDARD_AUTHORIZER
from shoal.broker.security.api_access import config_grant, grant_allowed
from shoal.broker.security.authorizer import CLUSTER_NAME, SUPPORTED_OPERATIONS, Authorizer
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from shoal.broker.apis import Api
    from shoal.broker.node import RequestContext
    from shoal.broker.services import BrokerServices

AUTHORIZER_CONFIG = "authorizer.class.name"

# The authorizer of each broker object, built on first use (None: no authorizer configured).
_AUTHORIZERS: weakref.WeakKeyDictionary[object, Authorizer | None] = weakref.WeakKeyDictionary()


def broker_authorizer(broker: BrokerServices) -> Authorizer | None:
    """The broker's authorizer over its cluster metadata's ACLs; None when none is configured."""
    try:
        cached = _AUTHORIZERS[broker]
    except (KeyError, TypeError):  # TypeError: a test double that cannot be weakly referenced
        pass
    else:
        if cached is None or cached.store is broker.metadata.acls:
            return cached
    config = broker.config
    built: Authorizer | None = None
    if config.get(AUTHORIZER_CONFIG).strip() == STANDARD_AUTHORIZER:
        built = Authorizer.from_config(config.props, broker.metadata.acls)
    try:
        _AUTHORIZERS[broker] = built
    except TypeError:
        pass
    return built


def authorizer(ctx: RequestContext) -> Authorizer | None:
    """The authorizer deciding ``ctx``'s request; None when none is configured."""
    return broker_authorizer(ctx.broker)


def client_address(ctx: RequestContext) -> str:
    """The client's address as ACL hosts name it: "127.0.0.1", not Java's "/127.0.0.1"."""
    return ctx.client_host.lstrip("/")


def allowed(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType = ResourceType.CLUSTER,
            name: str = CLUSTER_NAME) -> bool:
    """Whether the request's principal may do ``operation`` on the resource (the cluster unless named)."""
    auth = authorizer(ctx)
    if auth is None:
        return True
    return auth.authorize(ctx.principal, client_address(ctx), operation, resource_type, name)


def allowed_any(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType) -> bool:
    """Whether ``operation`` is allowed on some resource of the type (Kafka's authorizeByResourceType)."""
    auth = authorizer(ctx)
    if auth is None:
        return True
    return auth.authorize_any(ctx.principal, client_address(ctx), operation, resource_type)


def filter_allowed(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType,
                   names: Iterable[str]) -> set[str]:
    """The names among ``names`` whose resource the principal may do ``operation`` on."""
    auth = authorizer(ctx)
    unique = set(names)
    if auth is None:
        return unique
    principal, host = ctx.principal, client_address(ctx)
    return {n for n in unique if auth.authorize(principal, host, operation, resource_type, n)}


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str = CLUSTER_NAME) -> int:
    """KIP-430's bit field for the resource: what the principal may do (with no authorizer, every
    operation the resource type supports, as Kafka reports then)."""
    auth = authorizer(ctx)
    if auth is None:
        return sum(1 << op for op in SUPPORTED_OPERATIONS.get(resource_type, ()))
    return auth.authorized_operations(ctx.principal, client_address(ctx), resource_type, name)


def authorize(ctx: RequestContext, api: Api) -> None:
    """The dispatch stage before ``api``'s handler runs.

    Kafka's checks depend on the request's content and a denial shapes the response (one
    partition's error, a topic left out of a listing...), so each handler makes its API's checks
    through the helpers above; this stage only builds the broker's authorizer on first use, so a
    bad ACL configuration shows up at the first request rather than inside a handler.
    """
    broker_authorizer(ctx.broker)


# The messages of Kafka's authorization errors (Errors.X.message()), for the APIs that send them.
DENIED_MESSAGES: dict[ErrorCode, str] = {
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
}


def config_denied(ctx: RequestContext, config_type: int, name: str, operation: AclOperation) -> ErrorCode | None:
    """Describe/Alter/IncrementalAlterConfigs: the error for a config resource the principal may not
    ``operation`` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on, by its type (a topic's configs are the
    topic's, a group's the group's, the others the cluster's); None when allowed or of a type
    Kafka refuses anyway."""
    auth = authorizer(ctx)
    found = config_grant(config_type, operation)
    if auth is None or found is None:
        return None
    grant, error = found
    return None if grant_allowed(auth, ctx.principal, client_address(ctx), grant, name) else error
