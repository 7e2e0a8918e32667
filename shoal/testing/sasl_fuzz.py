"""The fuzzer's SASL mode: what an unauthenticated client can throw at a SASL listener.

    python -m shoal.testing.fuzzer --sasl --frames 100000

Each fuzz session opens a connection to the SASL_PLAINTEXT listener and sends a SaslHandshake
(a real or made-up mechanism, v0 or v1) and then tokens: garbage, malformed PLAIN, SCRAM and
OAUTHBEARER messages, wrong credentials, raw tokens after v0, ordinary requests from the main
fuzzer (which must never reach their handlers) and frames that claim to be huge. Nothing may
authenticate, and at the end the broker must hold exactly the state it had before: no topic the
fuzz frames tried to create exists. Memory is the main fuzzer's RSS watch.
"""

from __future__ import annotations

import asyncio
import random
import struct
from collections.abc import Iterator
from typing import Any

from shoal.protocol.errors import DecodeError
from shoal.protocol.framing import decode_response_header, encode_request, response_header_version
from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.sasl_authenticate_request import SaslAuthenticateRequest
from shoal.protocol.generated.sasl_authenticate_response import SaslAuthenticateResponse
from shoal.protocol.generated.sasl_handshake_request import SaslHandshakeRequest
from shoal.waits import within

# The broker the fuzzer starts in SASL mode: PLAIN users and SCRAM enabled, a small frame bound
# before authentication (Kafka's sasl.server.max.receive.size is 512 KiB).
SASL_OVERRIDES = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config":
        'org.apache.kafka.common.security.plain.PlainLoginModule required user_fuzz="a-secret-nobody-guesses";',
}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI", "", "plain", "X" * 300]
SIZE = struct.Struct(">i")


def _token(rng: random.Random, mechanism: str) -> bytes:
    """A token that must not authenticate: malformed, or well formed with wrong credentials."""
    choice = rng.random()
    if choice < 0.25:
        return rng.randbytes(rng.randint(0, 600))
    user = rng.choice(["fuzz", "admin", "", "=2C", "a" * 200, "\u00e9"]).encode()
    if mechanism == "PLAIN" or choice < 0.45:
        parts = [rng.choice([b"", user]), user, rng.choice([b"", b"guess", b"\0", b"x" * 100])]
        return b"\0".join(parts[: rng.randint(1, 3)])
    if mechanism.startswith("SCRAM") or choice < 0.7:
        return rng.choice([b"n,,n=" + user + b",r=" + rng.randbytes(8).hex().encode(),
                           b"p=tls-unique,,n=fuzz,r=abc", b"n,a=other,n=fuzz,r=x", b"c=biws,r=abc,p=AAAA",
                           b"n,,n=fuzz,r=x,tokenauth=true", b"n,,", b"y,,n=fuzz,r=" + b"r" * 5000])
    return rng.choice([b"n,,\x01auth=Bearer " + rng.randbytes(40).hex().encode() + b"\x01\x01",
                       b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.e30.\x01\x01", b"\x01", b"n,a=x,\x01\x01"])


def session_frames(rng: random.Random, requests: Iterator[tuple[int, bytes]]) -> list[bytes]:
    """One session's frames: a handshake, then tokens, ordinary requests or an oversized claim."""
    mechanism = rng.choice(MECHANISMS)
    version = rng.choice([0, 1, 1, 1])
    frames = [encode_request(ApiKey.SASL_HANDSHAKE, version, 1, "fuzz",
                             SaslHandshakeRequest(mechanism=mechanism).encode(version))]
    for i in range(rng.randint(1, 4)):
        r = rng.random()
        if r < 0.15:
            frames.append(next(requests)[1])  # an ordinary (possibly mutated) request, unauthenticated
        elif r < 0.2:
            frames.append(SIZE.pack(rng.choice([1 << 20, 100 << 20, 2**31 - 1])) + rng.randbytes(64))
        elif version == 0:
            token = _token(rng, mechanism)
            frames.append(SIZE.pack(len(token)) + token)
        else:
            v = rng.randint(0, 2)
            frames.append(encode_request(ApiKey.SASL_AUTHENTICATE, v, 2 + i, "fuzz",
                                         SaslAuthenticateRequest(auth_bytes=_token(rng, mechanism)).encode(v)))
    return frames


async def fuzz_sessions(host: str, port: int, sessions: Iterator[list[bytes]], stats: Any,
                        answer_timeout: float) -> None:
    """Run sessions one after another on fresh connections; count frames, answers and closes.
    A SaslAuthenticate answered without an error would be a successful authentication: a finding."""
    for frames in sessions:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError as e:
            stats.unanswered.append(f"connect failed: {e}")
            await asyncio.sleep(0.1)
            continue
        try:
            for frame in frames:
                stats.frames += 1
                writer.write(frame)
                await writer.drain()
                answer = await within(read_frame(reader), answer_timeout)
                stats.answered += 1
                if _authenticated(frame, answer):
                    stats.control_failures.append(f"a fuzz token authenticated: {frame[:80].hex()}")
        except (asyncio.IncompleteReadError, ConnectionError):
            stats.closed += 1
        except TimeoutError:
            stats.waited += 1  # a frame still arriving or a huge size claim: the broker waits or closes
        finally:
            writer.close()


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = SIZE.unpack(await reader.readexactly(4))
    return await reader.readexactly(size)


def decode_answer(frame: bytes, api_key: int, version: int, response_cls: Any) -> Any:
    """A response frame (without its size) decoded past its header."""
    _, offset = decode_response_header(frame, response_header_version(api_key, version))
    return response_cls.decode(memoryview(frame)[offset:], version)


def _authenticated(frame: bytes, answer: bytes) -> bool:
    """Whether a SaslAuthenticate was answered as a success. OAUTHBEARER answers a bad token first
    with an error-free JSON challenge ({"status": ...}); that is a refusal, not a success."""
    if len(frame) < 8 or struct.unpack_from(">h", frame, 4)[0] != ApiKey.SASL_AUTHENTICATE:
        return False
    version = struct.unpack_from(">h", frame, 6)[0]
    try:
        response = decode_answer(answer, ApiKey.SASL_AUTHENTICATE, version, SaslAuthenticateResponse)
    except (DecodeError, ValueError, struct.error):
        return False
    return response.error_code == 0 and not bytes(response.auth_bytes).startswith(b'{"status"')
