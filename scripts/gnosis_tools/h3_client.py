"""An HTTP/3 client independent of gnosis (aioquic's QUIC, HTTP/3 and QPACK), for tests/h3.rs
and `verify httparena`'s static-h3 checks. ALPN h3, certificate not verified.

    h3_client.py get PORT REQUEST...   where REQUEST is METHOD:PATH[:BODY]

sends every request on one connection and prints one JSON line: the ALPN agreed, and per
request its status, headers and body (latin-1), or the error the stream or the connection
ended with. With H3_TELL_FIRST set, it prints the line `first answered` as soon as the first
request's answer is in (the others are sent with it), and waits for the connection to close
before the JSON line. H3_TIMEOUT: the seconds each answer may take (10). H3_SIGNAL="PATH
MARKER": once a body so far holds MARKER, the file PATH is made (an upstream of the test
waits for it to send the rest).

    h3_client.py spread PORT CONNECTIONS [--at-once]

opens CONNECTIONS connections, one after another (each served a GET of /json before the next
starts), or all at once with --at-once (as a load generator does), keeps them open until all
are, and prints one JSON line: how many landed on each worker, by the first byte of the
connection ID the server gave (it names the worker: src/quic/cid.rs).
"""

import asyncio
import collections
import json
import os
import ssl
import sys
from contextlib import AsyncExitStack

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, StreamReset


class Client(QuicConnectionProtocol):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.answers = {}
        self.waiting = {}
        self.closed = None
        self.terminated = asyncio.get_running_loop().create_future()
        signal = os.environ.get("H3_SIGNAL", "").split(" ", 1)
        self.signal = (signal[0], signal[1].encode()) if len(signal) == 2 else None

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            self.closed = {"error_code": event.error_code, "reason": event.reason_phrase}
            self.terminated.set_result(None)
            for future in self.waiting.values():
                if not future.done():
                    future.set_result(None)
            return
        if isinstance(event, StreamReset) and event.stream_id in self.waiting:
            self.answers[event.stream_id]["reset"] = event.error_code
            self.waiting[event.stream_id].set_result(None)
            return
        for h3_event in self.h3.handle_event(event):
            answer = self.answers.get(h3_event.stream_id)
            if answer is None:
                continue
            if isinstance(h3_event, HeadersReceived):
                headers = [[k.decode("latin-1"), v.decode("latin-1")] for k, v in h3_event.headers]
                answer.setdefault("headers", []).extend(headers)
            elif isinstance(h3_event, DataReceived):
                answer["chunks"].append(h3_event.data)
                if self.signal and self.signal[1] in b"".join(answer["chunks"]):
                    open(self.signal[0], "w").close()
                    self.signal = None
            if h3_event.stream_ended:
                self.waiting[h3_event.stream_id].set_result(None)

    async def request(self, method, path, body, port, extra_headers=()):
        stream_id = self._quic.get_next_available_stream_id()
        headers = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", f"localhost:{port}".encode()),
            (b":path", path.encode()),
        ] + [(name.encode(), value.encode()) for name, value in extra_headers]
        if body is not None:
            headers.append((b"content-length", str(len(body)).encode()))
        self.h3.send_headers(stream_id, headers, end_stream=body is None)
        if body is not None:
            self.h3.send_data(stream_id, body.encode(), end_stream=True)
        # The body's pieces, joined once it is all in: a large body is not copied per piece.
        self.answers[stream_id] = {"chunks": []}
        self.waiting[stream_id] = asyncio.get_running_loop().create_future()
        self.transmit()
        try:
            await asyncio.wait_for(self.waiting[stream_id], float(os.environ.get("H3_TIMEOUT", 10)))
        except asyncio.TimeoutError:
            seen = {k: {"bytes": sum(map(len, v["chunks"])), "headers": v.get("headers")}
                    for k, v in self.answers.items()}
            print("unanswered stream %d; so far %r" % (stream_id, seen), file=sys.stderr)
            raise
        answer = self.answers[stream_id]
        answer["body"] = b"".join(answer.pop("chunks")).decode("latin-1")
        return answer


def configuration():
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    config.verify_mode = ssl.CERT_NONE
    return config


async def exchange(port, requests, host="127.0.0.1", extra_headers=(), tell_first=False):
    """Sends `requests` ((method, path, body or None) each) on one connection to `port`;
    returns the ALPN agreed, the answers (status and fields in "headers", "body", or "reset")
    and how the connection closed, if it did."""
    async with connect(host, port, configuration=configuration(),
                       create_protocol=Client) as client:
        tasks = [asyncio.ensure_future(client.request(method, path, body, port, extra_headers))
                 for method, path, body in requests]
        if tell_first:
            await tasks[0]
            print("first answered", flush=True)
        answers = await asyncio.gather(*tasks)
        if tell_first:
            await asyncio.wait_for(client.terminated, 30)
        alpn = client._quic.tls.alpn_negotiated
        return {"alpn": alpn, "answers": answers, "closed": client.closed}


def header(answer, name):
    """The value of field `name` in an answer of `exchange`'s, or None."""
    return next((value for key, value in answer.get("headers", []) if key == name), None)


async def open_one(stack, port):
    """A connection served a GET of /json, kept open by `stack`: the worker it is on."""
    client = await stack.enter_async_context(
        connect("127.0.0.1", port, configuration=configuration(), create_protocol=Client))
    answer = await client.request("GET", "/json", None, port)
    if header(answer, ":status") != "200":
        raise SystemExit("GET /json answered %r" % answer)
    # The ID in use once the handshake is done: one the server issued.
    return client._quic._peer_cid.cid[0]


async def spread(port, connections, at_once):
    async with AsyncExitStack() as stack:
        if at_once:
            workers = await asyncio.gather(*(open_one(stack, port) for _ in range(connections)))
        else:
            workers = [await open_one(stack, port) for _ in range(connections)]
    counts = collections.Counter(workers)
    return {str(worker): counts[worker] for worker in sorted(counts)}


def parse(request):
    method, path, *body = request.split(":", 2)
    return method, path, body[0] if body else None


if __name__ == "__main__":
    mode, port, rest = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    if mode == "get":
        extra = [tuple(line.split(": ", 1)) for line in os.environ.get("H3_HEADERS", "").splitlines()]
        result = exchange(port, [parse(r) for r in rest], extra_headers=extra,
                          tell_first=bool(os.environ.get("H3_TELL_FIRST")))
    elif mode == "spread":
        result = spread(port, int(rest[0]), "--at-once" in rest[1:])
    else:
        raise SystemExit(__doc__)
    print(json.dumps(asyncio.run(result)))
