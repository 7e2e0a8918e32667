"""SaslHandshake and SaslAuthenticate: the connection's authentication exchange.

The exchange itself is the connection's state machine (broker/security/authentication.py); these
handlers turn its answers into Kafka's responses. A failed authentication is answered after
`connection.failed.authentication.delay.ms` and the connection is then closed, as Kafka does, so
that guessing passwords costs time.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from shoal.broker.apis import handles
from shoal.broker.security.authentication import AuthenticationFailed
from shoal.clock import now_ms
from shoal.protocol.errors import ErrorCode
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.sasl_authenticate_response import SaslAuthenticateResponse
from shoal.protocol.generated.sasl_handshake_response import SaslHandshakeResponse

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from shoal.broker.node import RequestContext
    from shoal.protocol.generated.sasl_authenticate_request import SaslAuthenticateRequest
    from shoal.protocol.generated.sasl_handshake_request import SaslHandshakeRequest


@handles(ApiKey.SASL_HANDSHAKE)
async def sasl_handshake(ctx: RequestContext, req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    conn = ctx.connection
    if conn is None:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    error, mechanisms = conn.auth.handshake(req.mechanism, ctx.api_version)
    if error != ErrorCode.NONE and conn.auth.sasl is not None:
        conn.close_after_response()
    return SaslHandshakeResponse(error_code=error, mechanisms=mechanisms)


@handles(ApiKey.SASL_AUTHENTICATE)
async def sasl_authenticate(ctx: RequestContext, req: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    conn = ctx.connection
    if conn is None or conn.auth.sasl is None:
        return SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message="SaslAuthenticate request received after successful authentication")
    try:
        answer, lifetime = conn.auth.authenticate(bytes(req.auth_bytes), now_ms())
    except AuthenticationFailed as e:
        # as Kafka's authenticator logs it: who and why, never a credential
        log.info("Failed authentication with %s (%s)", conn.peer, e)
        await failed_authentication_delay(ctx)
        conn.close_after_response()
        return SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(e))
    # Kafka leaves the message at its default, "", on success
    return SaslAuthenticateResponse(error_code=ErrorCode.NONE, auth_bytes=answer, session_lifetime_ms=lifetime)


async def failed_authentication_delay(ctx: RequestContext) -> None:
    """Kafka answers a failed authentication only after this delay (it slows password guessing)."""
    delay = ctx.broker.config.get_int("connection.failed.authentication.delay.ms")
    if delay > 0:
        await asyncio.sleep(delay / 1000)
