"""InitProducerId for idempotent producers (kafka-python 3 and Java enable it by default).

Transactional producers need the transaction coordinator, which comes later:
until then a transactional id is answered COORDINATOR_NOT_AVAILABLE, as
FindCoordinator answers for transaction keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.init_producer_id_response import InitProducerIdResponse

if TYPE_CHECKING:
    from shoal.broker.broker import Broker
    from shoal.broker.node import RequestContext


def register(broker: Broker) -> None:
    async def init_producer_id(ctx: RequestContext, req) -> InitProducerIdResponse:
        if req.transactional_id is not None:
            return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                          producer_id=-1, producer_epoch=-1)
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                      producer_id=broker.producer_ids.next_id(), producer_epoch=0)

    broker.apis.register(22, init_producer_id)
