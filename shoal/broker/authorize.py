"""The authorization stage of request dispatch: one place for the decision.

Every API declares the ACL checks it needs (`Access`, in broker.apis). shoal has no authorizer
configured, and Kafka with no authorizer (no `authorizer.class.name`) allows every request, so
this stage allows everything; the authorizer (DESIGN.md, "Security") makes its decision here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shoal.broker.apis import Api
    from shoal.broker.node import RequestContext


def authorize(ctx: RequestContext, api: Api) -> None:
    """Let the request run ``api``: always, as Kafka with no authorizer configured."""
