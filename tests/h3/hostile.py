"""A hostile HTTP/3 client for tests/h3_hostile.rs: raw UDP datagrams, and aioquic driven past
what a well-behaved client does. Each command prints one JSON line of what it saw; the Rust
test asserts.

    hostile.py garbage PORT          datagrams no server may answer; the answers that came
    hostile.py version PORT          a Version Negotiation for an unknown version
    hostile.py reset PORT            stateless resets for connection IDs of no connection
    hostile.py streams PORT CASE     stream limits: CASE is many (150 requests, 100 at a time),
                                     bidi or uni (one stream past the limit), uni-within (8 in all),
                                     uni-many (300 ended one after another), cancel-many (200
                                     requests cancelled by the client, 100 at a time)
    hostile.py error PORT CASE       HTTP/3 errors: data-first, no-path, uppercase (lowercase: its
                                     well-formed twin), dynamic-qpack, too-large (a 413),
                                     reset-control, stop-control, stop-then-body
    hostile.py flood PORT N          N client Initials never completed
    hostile.py request PORT          one request on a new connection, and whether it was retried
"""

import asyncio
import json
import random
import socket
import ssl
import struct
import sys
import time

import pylsqpack
from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, FrameType, H3Connection, encode_frame
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection
from aioquic.quic.events import ConnectionTerminated, StreamReset

HOST = "127.0.0.1"
# The server's connection IDs: 8 bytes, the first naming the worker (src/quic/cid.rs); the
# tests start it with 2 workers.
CID_LEN = 8
WORKERS = 2
# An unknown version; not of the reserved 0x?a?a?a?a pattern, which quinn-proto greases with.
UNKNOWN_VERSION = 0x1A2A3A4B
SEED = 9114


def out(value):
    print(json.dumps(value), flush=True)


def udp_socket():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((HOST, 0))
    return sock


def receive_all(sock, wait):
    """Every datagram arriving on `sock` within `wait` seconds."""
    got, deadline = [], time.monotonic() + wait
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            got.append(sock.recv(65536))
        except socket.timeout:
            break
    return got


def client_config():
    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN)
    config.verify_mode = ssl.CERT_NONE
    return config


def client_initial(port):
    """A real client Initial (aioquic's first datagram: its ClientHello, padded to 1200 bytes
    or more), its connection, and its source connection ID."""
    conn = QuicConnection(configuration=client_config())
    conn.connect((HOST, port), now=time.time())
    datagrams = conn.datagrams_to_send(now=time.time())
    return datagrams[0][0], conn, conn.host_cid


def long_header(kind, version, dcid, scid):
    """A long header's first bytes (RFC 9000 17.2): form and fixed bits, its type, the
    version, both connection IDs."""
    first = 0xC0 | (kind << 4)
    return bytes([first]) + struct.pack("!I", version) + bytes([len(dcid)]) + dcid + bytes([len(scid)]) + scid


def parse_long_header(datagram):
    """(first byte, version, dcid, scid, rest) of a long header."""
    version = struct.unpack("!I", datagram[1:5])[0]
    dcid_len = datagram[5]
    dcid = datagram[6:6 + dcid_len]
    scid_len = datagram[6 + dcid_len]
    scid = datagram[7 + dcid_len:7 + dcid_len + scid_len]
    return datagram[0], version, dcid, scid, datagram[7 + dcid_len + scid_len:]


def garbage(port):
    """Datagrams that are no packet of any connection, and that no rule of RFC 9000 asks an
    answer to, each kind labelled; then the answers they got (none, when all is well)."""
    rng = random.Random(SEED)
    sent = []

    def add(label, datagram):
        sent.append((label, bytes(datagram)))

    add("empty", b"")
    for length in (1, 2, 5, 8, 20, 40, 100, 600, 1199):
        for _ in range(4):
            data = bytearray(rng.randbytes(length))
            if data[0] & 0x80 == 0 and length > 1:
                # A short header whose ID names no worker (byte 1 below WORKERS would name one,
                # and a long enough one of those is answered with a stateless reset).
                data[1] = rng.randrange(WORKERS, 256)
            add(f"random {length}", data)
    initial, _, _ = client_initial(port)
    for length in (1, 5, 6, 7, 20, 100, 600, 1000, 1199):
        add(f"initial cut to {length}", initial[:length])
    broken = bytearray(initial)
    # Inside the packet's protected payload (aioquic pads the datagram after its packet).
    for i in range(100, 140):
        broken[i] ^= 0x5A
    add("initial with a broken payload", broken)
    for length in range(1, 9):
        add(f"short header of {length}: too short for an ID", bytes([0x40]) + bytes([0] * (length - 1)))
    for length in (9, 20, 21):
        add(f"short header of {length} for worker 0: too short to answer", bytes([0x40, 0]) + rng.randbytes(length - 2))
    for kind, name in ((1, "0-RTT"), (2, "handshake")):
        header = long_header(kind, 1, bytes([0]) + rng.randbytes(7), rng.randbytes(8))
        add(f"{name} for no connection", header + rng.randbytes(1200 - len(header)))
    header = long_header(0, 1, rng.randbytes(21), rng.randbytes(8))
    add("initial with a 21-byte ID", header + rng.randbytes(1200 - len(header)))
    header = long_header(3, 1, rng.randbytes(8), rng.randbytes(8))
    add("retry to a server", header + rng.randbytes(100))
    vn = bytes([0x80]) + struct.pack("!I", 0) + bytes([8]) + rng.randbytes(8) + bytes([8]) + rng.randbytes(8)
    add("version negotiation to a server", vn + struct.pack("!I", 1) * 300)
    add("unknown version, 1199 bytes", long_header(0, UNKNOWN_VERSION, rng.randbytes(8), rng.randbytes(8)).ljust(1199, b"\0"))

    sock = udp_socket()
    for _, datagram in sent:
        sock.sendto(datagram, (HOST, port))
        time.sleep(0.001)
    answers = receive_all(sock, 2.0)
    out({"sent": len(sent), "labels": sorted({label for label, _ in sent}),
         "answers": [answer[:48].hex() for answer in answers]})


def version(port):
    """A 1200-byte Initial of an unknown version, and one of 1199 bytes."""
    rng = random.Random(SEED)
    dcid, scid = rng.randbytes(8), rng.randbytes(5)
    header = long_header(0, UNKNOWN_VERSION, dcid, scid)
    sock = udp_socket()
    sock.sendto(header.ljust(1199, b"\0"), (HOST, port))
    short = receive_all(sock, 1.0)
    sock.sendto(header.ljust(1200, b"\0"), (HOST, port))
    answers = receive_all(sock, 2.0)
    result = {"short_answers": len(short), "answers": len(answers), "sent_dcid": dcid.hex(), "sent_scid": scid.hex()}
    if answers:
        first, got_version, got_dcid, got_scid, rest = parse_long_header(answers[0])
        result.update(first=first, version=got_version, dcid=got_dcid.hex(), scid=got_scid.hex(),
                      versions=[struct.unpack("!I", rest[i:i + 4])[0] for i in range(0, len(rest) - 3, 4)],
                      rest_len=len(rest), length=len(answers[0]))  # fmt: skip
    out(result)


class Client(QuicConnectionProtocol):
    """An HTTP/3 client that records its streams' answers and resets, and its end."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.h3 = H3Connection(self._quic)
        self.answers = {}
        self.closed = None
        self.terminated = asyncio.get_running_loop().create_future()
        self.changed = asyncio.Event()

    def quic_event_received(self, event):
        if isinstance(event, ConnectionTerminated):
            self.closed = {"error_code": event.error_code, "reason": event.reason_phrase}
            if not self.terminated.done():
                self.terminated.set_result(None)
        elif isinstance(event, StreamReset):
            self.answers.setdefault(event.stream_id, {})["reset"] = event.error_code
        else:
            for h3_event in self.h3.handle_event(event):
                answer = self.answers.setdefault(h3_event.stream_id, {})
                if isinstance(h3_event, HeadersReceived):
                    answer["status"] = dict(h3_event.headers).get(b":status", b"").decode()
                elif isinstance(h3_event, DataReceived):
                    answer["body"] = answer.get("body", "") + h3_event.data.decode("latin-1")
                if getattr(h3_event, "stream_ended", False):
                    answer["ended"] = True
        self.changed.set()

    def get(self, path, port):
        stream = self._quic.get_next_available_stream_id()
        self.h3.send_headers(stream, request_headers(path, port), end_stream=True)
        return stream

    def raw(self, data, end=True, unidirectional=False):
        """`data` as a new stream's bytes, bypassing aioquic's HTTP/3 layer."""
        stream = self._quic.get_next_available_stream_id(is_unidirectional=unidirectional)
        self._quic.send_stream_data(stream, data, end_stream=end)
        return stream

    async def until(self, done, timeout):
        """Waits until `done()` or the connection ended; False if `timeout` passed first.
        Looks every 50 ms too: some changes (a MAX_STREAMS) make no event."""
        deadline = time.monotonic() + timeout
        while not done() and self.closed is None:
            if time.monotonic() > deadline:
                return False
            self.transmit()
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), 0.05)
            except asyncio.TimeoutError:
                pass
        return True

    def finished(self, streams):
        return lambda: all(self.answers.get(s, {}).get("ended") or "reset" in self.answers.get(s, {}) for s in streams)


def request_headers(path, port):
    return [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", f"localhost:{port}".encode()),
            (b":path", path.encode())]  # fmt: skip


async def session(port, body):
    async with connect(HOST, port, configuration=client_config(), create_protocol=Client) as client:
        return await body(client)


def limits_of(quic):
    return {"bidi": quic._remote_max_streams_bidi, "uni": quic._remote_max_streams_uni}


async def streams(port, case):
    async def run(client):
        quic = client._quic
        result = {"limits": limits_of(quic)}
        if case == "many":
            # 150 requests, each answered after 1 s: aioquic sends 100 (the server's limit) and
            # holds the rest until the server grants more streams (MAX_STREAMS).
            ids = [client.get("/delay/1000", port) for _ in range(150)]
            client.transmit()
            result["sent_at_once"] = sum(1 for s in ids if not quic._streams[s].is_blocked)
            result["held"] = len(quic._streams_blocked_bidi)
            await client.until(client.finished(ids), 60)
            answers = [client.answers.get(s, {}) for s in ids]
            result["ok"] = sum(1 for a in answers if a.get("status") == "200" and a.get("body") == "1000")
            result["others"] = [a for a in answers if a.get("status") != "200"][:3]
        elif case == "uni-many":
            # 300 streams of a reserved type, each ended: 5 at a time fit beside the client's
            # 3, the others wait for the server to grant more as those end.
            ids = [client.raw(b"\x21grease", unidirectional=True) for _ in range(300)]
            client.transmit()
            await client.until(lambda: not quic._streams_blocked_uni, 60)
            result["opened"] = len(ids) + 3
            result["held"] = len(quic._streams_blocked_uni)
            stream = client.get("/baseline2?a=1&b=1", port)
            await client.until(client.finished([stream]), 10)
            result["answer"] = client.answers.get(stream)
        elif case == "cancel-many":
            # Twice 100 requests answered after 5 s, each cancelled (RFC 9114 4.1.2: the
            # stream reset and stopped with H3_REQUEST_CANCELLED) once sent: the second 100
            # need the streams of the first back. Then a request is answered.
            cancelled, result["rounds_sent"] = 0, []
            for _ in range(2):
                ids = [client.get("/delay/5000", port) for _ in range(100)]
                client.transmit()
                # A stream cancelled while held back would reach the server past its limit.
                sent = await client.until(lambda: not quic._streams_blocked_bidi, 20)
                result["rounds_sent"].append(sent)
                if not sent:
                    break
                await asyncio.sleep(0.2)
                for stream in ids:
                    quic.stop_stream(stream, 0x10C)
                    quic.reset_stream(stream, 0x10C)
                    cancelled += 1
                client.transmit()
            result["cancelled"] = cancelled
            stream = client.get("/baseline2?a=1&b=1", port)
            result["answered"] = await client.until(client.finished([stream]), 20)
            result["answer"] = client.answers.get(stream)
        elif case in ("bidi", "uni-within", "uni"):
            # Past aioquic's own respect of the server's limits.
            quic._remote_max_streams_bidi = quic._remote_max_streams_uni = 1000
            if case == "bidi":
                ids = [client.get("/delay/5000", port) for _ in range(101)]
                result["opened"] = len(ids)
            else:
                # The client's control and QPACK streams are 3 of the 8; reserved types (0x21,
                # RFC 9114 6.2.3) fill the rest: 5 more fit, a 6th is one too many.
                extra = 5 if case == "uni-within" else 6
                ids = [client.raw(b"\x21grease", end=False, unidirectional=True) for _ in range(extra)]
                result["opened"] = len(ids) + 3
                stream = client.get("/baseline2?a=1&b=1", port)
                await client.until(client.finished([stream]), 10)
                result["answer"] = client.answers.get(stream)
            client.transmit()
            # Until the server closes the connection; one within its limits stays open.
            await client.until(lambda: False, 10 if case != "uni-within" else 1)
        result["closed"] = client.closed
        return result

    out(await session(port, run))


async def error(port, case):
    encoder = pylsqpack.Encoder()  # the static table only: no SETTINGS applied

    def headers_frame(stream, headers):
        _, block = encoder.encode(stream, headers)
        return encode_frame(FrameType.HEADERS, block)

    async def run(client):
        quic = client._quic
        stream = quic.get_next_available_stream_id()
        result_extra = {}
        if case == "data-first":
            client.raw(encode_frame(FrameType.DATA, b"abc"), end=False)
        elif case == "no-path":
            fields = [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"localhost")]
            client.raw(headers_frame(stream, fields))
        elif case in ("uppercase", "lowercase"):
            name = b"X-Upper" if case == "uppercase" else b"x-upper"
            fields = request_headers("/baseline2?a=1&b=1", port) + [(name, b"1")]
            client.raw(headers_frame(stream, fields))
        elif case == "too-large":
            # A body past the server's --max-body (the test's 1,000 bytes), sent at once: the
            # server answers 413 before the body's end. Zeros: read as a new stream's bytes,
            # they would be DATA frames before any HEADERS.
            body = bytes(200_000)
            fields = [(b":method", b"POST")] + request_headers("/baseline2?a=1&b=1", port)[1:]
            fields.append((b"content-length", str(len(body)).encode()))
            client.h3.send_headers(stream, fields)
            client.h3.send_data(stream, body, end_stream=True)
        elif case == "stop-then-body":
            # The client cancels the answer (STOP_SENDING), then sends its body all the same:
            # zeros, DATA frames before any HEADERS if read as a new request. Unless the
            # server has reset the stream meanwhile (then aioquic sends no more on it).
            fields = [(b":method", b"POST")] + request_headers("/baseline2?a=1&b=1", port)[1:]
            fields.append((b"content-length", b"900"))
            client.h3.send_headers(stream, fields)
            quic.stop_stream(stream, 0x10C)
            client.transmit()
            await asyncio.sleep(0.5)
            try:
                quic.send_stream_data(stream, bytes(900), end_stream=True)
                result_extra["body_sent"] = True
            except (ValueError, RuntimeError):
                result_extra["body_sent"] = False
        elif case == "stop-control":
            await client.until(lambda: client.h3._peer_control_stream_id is not None, 10)
            quic.stop_stream(client.h3._peer_control_stream_id, 0x100)
        elif case == "reset-control":
            # A critical stream may not close (RFC 9114 6.2.1).
            quic.reset_stream(client.h3._local_control_stream_id, 0x100)
        elif case == "dynamic-qpack":
            # An encoded Required Insert Count of 2 (anything but 0 needs the dynamic table,
            # which the server's capacity of 0 rules out), Base 0, then dynamic field 0.
            client.raw(encode_frame(FrameType.HEADERS, b"\x02\x00\x80"))
        client.transmit()
        await client.until(client.finished([stream]), 10)
        result = {"stream": client.answers.get(stream), "closed": client.closed, **result_extra}
        if client.closed is None:
            # The connection lives on: a good request on it is answered.
            good = client.get("/baseline2?a=40&b=2", port)
            await client.until(client.finished([good]), 10)
            result["after"] = client.answers.get(good)
            result["closed_after"] = client.closed
        return result

    out(await session(port, run))


def first_answer(sock, wait):
    """The first datagram arriving within `wait` seconds, or None."""
    sock.settimeout(wait)
    try:
        return sock.recv(65536)
    except socket.timeout:
        return None


def short_packet(cid, length, rng):
    """A short-header packet's look: fixed bit, `cid`, random bytes to `length` in all."""
    return bytes([0x40 | rng.randrange(0, 0x40)]) + cid + rng.randbytes(length - 1 - len(cid))


def described(answer):
    return None if answer is None else {"length": len(answer), "first": answer[0], "token": answer[-16:].hex()}


async def reset(port):
    """Stateless resets: for the IDs a connection had once it is gone, whose tokens the client
    learned while it was open (the transport parameters, NEW_CONNECTION_ID); for made-up IDs
    naming each worker; by the size of their trigger; and several triggers in a burst."""
    rng = random.Random(SEED)

    async def learn(client):
        stream = client.get("/baseline2?a=1&b=1", port)
        await client.until(client.finished([stream]), 10)
        quic = client._quic
        known = [quic._peer_cid] + list(quic._peer_cid_available)
        return [(c.cid, c.stateless_reset_token) for c in known if c.stateless_reset_token]

    learned = await session(port, learn)
    sock = udp_socket()

    def trigger(cid, length, wait=2.0):
        sock.sendto(short_packet(cid, length, rng), (HOST, port))
        answer = first_answer(sock, wait)
        time.sleep(0.05)  # past quinn-proto's least interval between two resets (20 ms)
        return answer

    # The closed connection's IDs are answered once the server has forgotten them (it drains
    # a few round trips first, and drops what comes meanwhile).
    gone = []
    for cid, token in learned[:3]:
        deadline, answer = time.monotonic() + 15, None
        while answer is None and time.monotonic() < deadline:
            answer = trigger(cid, 100, wait=0.3)
        gone.append({"cid": cid.hex(), "learned_token": token.hex(), "answer": described(answer)})
    made_up = []
    for worker in range(WORKERS):
        cid = bytes([worker]) + rng.randbytes(CID_LEN - 1)
        made_up.append({"worker": worker, "answers": [described(trigger(cid, 100)) for _ in range(2)]})
    other = bytes([0]) + rng.randbytes(CID_LEN - 1)
    sizes = {length: described(trigger(other, length, wait=1.0)) for length in (21, 22, 42, 43, 100, 1200)}
    burst = [bytes([0]) + rng.randbytes(CID_LEN - 1) for _ in range(30)]
    started = time.monotonic()
    for cid in burst:
        sock.sendto(short_packet(cid, 100, rng), (HOST, port))
    burst_ms = (time.monotonic() - started) * 1000
    out({"learned": len(learned), "gone": gone, "made_up": made_up,
         "sizes": {str(k): v for k, v in sizes.items()},
         "burst": {"sent": len(burst), "ms": round(burst_ms, 2), "answers": len(receive_all(sock, 1.0))}})  # fmt: skip


def flood(port, count):
    """`count` client Initials (aioquic's, each its own connection) from many source ports,
    none ever completed: they go out in batches of 32, each waited for until every one of it
    was answered (or 10 s), so the server's socket buffer never overflows. Counts what came
    back per Initial: a Retry, or the server's handshake (an Initial of its own)."""
    sockets = [udp_socket() for _ in range(100)]
    by_scid = {}
    kinds = {"retry": set(), "handshake": set()}
    others = 0
    started = time.monotonic()

    def take(sock):
        nonlocal others
        sock.setblocking(False)
        while True:
            try:
                datagram = sock.recv(65536)
            except BlockingIOError:
                return
            if not datagram or datagram[0] & 0x80 == 0 or len(datagram) < 7:
                others += 1
                continue
            first, got_version, dcid, _, _ = parse_long_header(datagram)
            kind = (first & 0x30) >> 4
            if got_version == 1 and dcid in by_scid:
                kinds["retry" if kind == 3 else "handshake"].add(dcid)
            else:
                others += 1

    for start in range(0, count, 32):
        batch = []
        for i in range(start, min(count, start + 32)):
            initial, _, scid = client_initial(port)
            by_scid[scid] = i
            batch.append(scid)
            sockets[i % len(sockets)].sendto(initial, (HOST, port))
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for sock in sockets:
                take(sock)
            if all(s in kinds["retry"] or s in kinds["handshake"] for s in batch):
                break
            time.sleep(0.005)
    flood_seconds = time.monotonic() - started
    for sock in sockets:
        take(sock)
    answered = kinds["retry"] | kinds["handshake"]
    out({"initials": count, "answered": len(answered), "retry": len(kinds["retry"]),
         "handshake": len(kinds["handshake"]), "both": len(kinds["retry"] & kinds["handshake"]),
         "others": others, "seconds": round(flood_seconds, 1)})  # fmt: skip


async def one_request(port):
    """A client's request on a connection of its own: its answer, and whether the server asked
    it to prove its address first (a Retry)."""

    async def run(client):
        stream = client.get("/baseline2?a=40&b=2", port)
        await client.until(client.finished([stream]), 30)
        return {"answer": client.answers.get(stream), "retried": client._quic._retry_count}

    started = time.monotonic()
    result = await asyncio.wait_for(session(port, run), 60)
    result["seconds"] = round(time.monotonic() - started, 2)
    out(result)


def main():
    command, port = sys.argv[1], int(sys.argv[2])
    if command == "garbage":
        garbage(port)
    elif command == "version":
        version(port)
    elif command == "reset":
        asyncio.run(reset(port))
    elif command == "streams":
        asyncio.run(streams(port, sys.argv[3]))
    elif command == "error":
        asyncio.run(error(port, sys.argv[3]))
    elif command == "flood":
        flood(port, int(sys.argv[3]))
    elif command == "request":
        asyncio.run(one_request(port))
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
