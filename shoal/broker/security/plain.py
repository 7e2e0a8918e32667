"""SASL/PLAIN (RFC 4616) checked against the JAAS ``user_<name>`` passwords, as Kafka's PlainSaslServer.

Every failure here is one Kafka reports to the client with its own message (a
SaslAuthenticationException in PlainSaslServer), so the messages are Kafka's word for word.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from shoal.broker.security.sasl_server import PLAIN, IllegalSaslStateError, SaslAuthenticationError


class PlainServer:
    """One PLAIN exchange: a single client token ``authzid NUL authcid NUL passwd``."""

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.complete = False
        self.authorization_id = ""

    def evaluate(self, token: bytes, now_ms: int) -> bytes:
        """Check the client's credentials; return the empty answer on success."""
        if self.complete:
            # Kafka's PlainSaslServer would simply re-run; a second token on a finished exchange
            # is a protocol error here, as for the other mechanisms.
            raise IllegalSaslStateError("Unexpected challenge in Sasl server state COMPLETE")
        # Java decodes with replacement of malformed bytes; so does errors="replace".
        message = token.decode("utf-8", errors="replace")
        # PlainSaslServer.extractTokens looks for at most four NUL-separated parts.
        parts = message.split("\0", 3)
        if len(parts) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        if not self._authenticate(username, password):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.authorization_id = username
        self.complete = True
        return b""

    def _authenticate(self, username: str, password: str) -> bool:
        expected = self._users.get(username)
        if expected is None:
            return False
        # Constant time, so the comparison's duration does not reveal a prefix of the password.
        return hmac.compare_digest(password.encode("utf-8"), expected.encode("utf-8"))

    def session_expiry_ms(self) -> int | None:
        """PLAIN credentials do not expire."""
        return None
