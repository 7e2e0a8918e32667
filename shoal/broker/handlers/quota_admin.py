"""AlterClientQuotas and DescribeClientQuotas: client quotas over the wire.

What `kafka-configs.sh --entity-type users/clients --alter --add-config producer_byte_rate=...`
and AdminClient's alterClientQuotas/describeClientQuotas send. Quotas live in the cluster
metadata log; validation, matching and messages are broker/quotas.py's (Kafka's controller and
metadata image). Both need the cluster's ALTER_CONFIGS or DESCRIBE_CONFIGS; enforcement is
BrokerNode.dispatch's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.broker.apis import Access, handles
from shoal.broker.authorize import DENIED_MESSAGES, allowed
from shoal.broker.quotas import entity_pairs, java_map_order
from shoal.protocol.acl_operations import AclOperation, ResourceType
from shoal.protocol.errors import ErrorCode, Refusal
from shoal.protocol.generated.alter_client_quotas_response import AlterClientQuotasResponse
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.describe_client_quotas_response import DescribeClientQuotasResponse

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.protocol.generated.alter_client_quotas_request import AlterClientQuotasRequest
    from shoal.protocol.generated.describe_client_quotas_request import DescribeClientQuotasRequest

_Alter = AlterClientQuotasResponse
_Describe = DescribeClientQuotasResponse
_DENIED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def _entities(pairs: list[tuple[str, str | None]]) -> list[AlterClientQuotasResponse.EntityData]:
    return [_Alter.EntityData(entity_type=t, entity_name=n) for t, n in pairs]


@handles(ApiKey.ALTER_CLIENT_QUOTAS, access=(Access(ResourceType.CLUSTER, AclOperation.ALTER_CONFIGS),))
async def alter_client_quotas(ctx: RequestContext, req: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    entries = req.entries or []
    if not allowed(ctx, AclOperation.ALTER_CONFIGS):  # every entry gets the error, as named
        return _Alter(throttle_time_ms=0, entries=[_Alter.EntryData(
            error_code=_DENIED, error_message=DENIED_MESSAGES[_DENIED],
            entity=_entities([(e.entity_type, e.entity_name) for e in (entry.entity or [])]))
            for entry in entries])
    alterations = [([(e.entity_type, e.entity_name) for e in (entry.entity or [])],
                    [(op.key, None if op.remove else op.value) for op in (entry.ops or [])])
                   for entry in entries]
    results = ctx.broker.metadata.alter_client_quotas(alterations, req.validate_only) if alterations else []
    out = []
    for r in results:
        names = dict(r.pairs)  # the entity as Kafka's map of it (a type named twice: its last name)
        pairs = [(t, names[t]) for t in java_map_order(list(names), len(r.pairs))]
        out.append(_Alter.EntryData(error_code=r.error, error_message=r.message, entity=_entities(pairs)))
    return _Alter(throttle_time_ms=0, entries=out)


@handles(ApiKey.DESCRIBE_CLIENT_QUOTAS, access=(Access(ResourceType.CLUSTER, AclOperation.DESCRIBE_CONFIGS),))
async def describe_client_quotas(ctx: RequestContext,
                                 req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    if not allowed(ctx, AclOperation.DESCRIBE_CONFIGS):
        return _Describe(throttle_time_ms=0, error_code=_DENIED, error_message=DENIED_MESSAGES[_DENIED],
                         entries=None)
    components = [(c.entity_type, c.match_type, c.match) for c in (req.components or [])]
    try:
        found = ctx.broker.metadata.quotas.describe(components, req.strict)
    except Refusal as e:
        return _Describe(throttle_time_ms=0, error_code=e.code, error_message=e.message, entries=None)
    return _Describe(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=[
        _Describe.EntryData(
            entity=[_Describe.EntityData(entity_type=t, entity_name=n) for t, n in entity_pairs(entity)],
            values=[_Describe.ValueData(key=k, value=values[k]) for k in java_map_order(list(values), 0)])
        for entity, values in found])
