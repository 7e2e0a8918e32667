"""Every API the broker advertises, at every advertised version, answers a default request.

A default-constructed request (empty names, empty lists) is valid on the wire;
the broker must answer it with a response that decodes at that version — or,
for a request it refuses, close only that connection — and keep serving.
"""

from __future__ import annotations

import asyncio

from shoal.protocol.generated.api_keys import ApiKey
from shoal.protocol.generated.metadata_request import MetadataRequest
from tests.unit.broker_harness import RawClient, running_broker


def test_every_advertised_version_answers(tmp_path):
    async def main():
        async with running_broker(tmp_path) as b:
            answered = 0
            for api in b.apis:
                for version in range(api.min_version, api.max_version + 1):
                    c = await RawClient.connect(b.nodes[0].port)
                    try:
                        request = api.request()
                        if api.api_key == ApiKey.PRODUCE:
                            request.acks = 1  # acks=0 is answered by silence
                        resp = await c.call(api.api_key, version, request, timeout=10)
                        assert isinstance(resp, api.response)
                        answered += 1
                    except asyncio.IncompleteReadError:
                        raise AssertionError(f"{api.name} v{version}: connection closed") from None
                    except TimeoutError:
                        raise AssertionError(f"{api.name} v{version}: no answer in 10 s") from None
                    finally:
                        await c.close()
            assert answered > 150
            c = await RawClient.connect(b.nodes[0].port)
            assert (await c.call(ApiKey.METADATA, 12, MetadataRequest(topics=None))).brokers
    asyncio.run(asyncio.wait_for(main(), 120))
