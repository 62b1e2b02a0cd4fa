"""Which worker each of many HTTP/3 connections lands on, seen from the client (aioquic):
the first byte of the connection ID the server gave it names the worker (src/quic/cid.rs).

    spread.py PORT CONNECTIONS [--at-once]

opens CONNECTIONS connections, one after another (each served a GET of /json before the next
starts), or all at once with --at-once (as a load generator does), keeps them open until all
are, and prints one JSON line: the number of connections per worker index.
"""

import asyncio
import collections
import json
import ssl
import sys
from contextlib import AsyncExitStack

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import HeadersReceived
from aioquic.quic.configuration import QuicConfiguration


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.status = asyncio.get_running_loop().create_future()

    def quic_event_received(self, event):
        for h3_event in self.h3.handle_event(event):
            if isinstance(h3_event, HeadersReceived) and not self.status.done():
                self.status.set_result(dict(h3_event.headers)[b":status"].decode())

    async def get(self, port):
        stream_id = self._quic.get_next_available_stream_id()
        headers = [(b":method", b"GET"), (b":scheme", b"https"),
                   (b":authority", f"localhost:{port}".encode()), (b":path", b"/json")]
        self.h3.send_headers(stream_id, headers, end_stream=True)
        self.transmit()
        return await asyncio.wait_for(self.status, 30)


async def open_one(stack, port):
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    config.verify_mode = ssl.CERT_NONE
    client = await stack.enter_async_context(
        connect("127.0.0.1", port, configuration=config, create_protocol=Client))
    status = await client.get(port)
    if status != "200":
        raise SystemExit("GET /json answered %s" % status)
    # The ID in use once the handshake is done: one the server issued.
    return client._quic._peer_cid.cid[0]


async def main(port, connections, at_once):
    async with AsyncExitStack() as stack:
        if at_once:
            workers = await asyncio.gather(*(open_one(stack, port) for _ in range(connections)))
        else:
            workers = [await open_one(stack, port) for _ in range(connections)]
    counts = collections.Counter(workers)
    print(json.dumps({str(worker): counts[worker] for worker in sorted(counts)}))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), "--at-once" in sys.argv[3:]))
