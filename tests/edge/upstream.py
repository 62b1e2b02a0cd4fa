"""An HTTP/1.1 upstream for tests/edge: plain sockets, one thread per connection, keep-alive and
pipelining (requests read one after another from the same buffer), and answers shaped by the
path, so that the edge meets each way a response can be framed and each way it can go wrong.

    python3 upstream.py PORT

prints `listening` once it accepts; a request with `Connection: close` is the connection's last.
Paths:
    /echo...           200, JSON: the method, target, fields (in order) and body it received
    /created           201 with Location, two Set-Cookie, Cache-Control and a body
    /chunked           200, the body in three chunks and a trailer
    /close             200, no length: the body runs to the close (HTTP/1.0 style)
    /interim           100 Continue and 103 Early Hints, then 200
    /head-length       200 with Content-Length 1234; to HEAD, the head alone
    /not-modified      304 with an ETag and no body
    /slow?ms=N         200 after N ms
    /hang              never answers (the connection stays open)
    /reset             half a body, then a reset (SO_LINGER 0)
    /two-lengths       two Content-Lengths that disagree
    /smuggle           a 200 with a second response behind it in the same write
    /count             200, how many requests this process has read so far
    /deny?status=N     N, no body (an auth service that says no, or fails)
    /big?bytes=N       200, N bytes (a multiple of 16) with a Content-Length, in lines of 16 bytes
                       each naming its own index in hexadecimal (a byte out of place shows)
    /big-chunked?bytes=N  the same body, chunked (64 KiB chunks)
    /zeros?bytes=N     200, N zero bytes with a Content-Length; notes whether its client (the
                       edge) stopped taking them: a send found no room for a second
    /stalled           200, "yes" once a /zeros found no room for a second, else "no"
    /zeros-sent        200, how many bytes of /zeros bodies the kernel has taken so far
    /gate?file=PATH    200, chunked: "first part" at once, then, once PATH exists (the test
                       makes it when it has seen the first part), "the rest" and the end
    /gate-reset?file=PATH  200 with a Content-Length of 100000: "first part", then, once PATH
                       exists, a reset
    anything else      200 "hello from upstream"
A leading /api is left out (/api/echo is /echo), for the paths an auth service guards.
"""

import json
import os
import select
import socket
import struct
import sys
import threading
import time
from urllib.parse import parse_qs, urlsplit

served = 0
served_lock = threading.Lock()
stalled = threading.Event()
zeros_sent = 0


def lines(start, count):
    """`count` 16-byte lines from line `start`, each its own index in hexadecimal."""
    return b"".join(b"%015x\n" % i for i in range(start, start + count))


def blocks(total, block):
    """The body of /big in pieces of `block` bytes (multiples of 16)."""
    for start in range(0, total, block):
        size = min(block, total - start)
        yield lines(start // 16, size // 16)


def wait_for(path):
    """Returns once `path` exists (the test makes it), or after a minute."""
    for _ in range(6000):
        if os.path.exists(path):
            return
        time.sleep(0.01)


def read_request(conn, buffer):
    """One request from `conn` (bytes already read in `buffer`): (method, target, fields,
    body, rest), or None at the close."""
    while b"\r\n\r\n" not in buffer:
        data = conn.recv(65536)
        if not data:
            return None
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    fields = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:]]
    length = next((int(value) for name, value in fields if name.lower() == "content-length"), 0)
    while len(rest) < length:
        data = conn.recv(65536)
        if not data:
            return None
        rest += data
    return method, target, fields, rest[:length], rest[length:]


def answer(status, fields, body):
    head = "HTTP/1.1 %s\r\n" % status + "".join("%s: %s\r\n" % field for field in fields)
    return head.encode("latin-1") + b"\r\n" + body


def serve(conn):
    global served, zeros_sent
    buffer = b""
    try:
        while True:
            request = read_request(conn, buffer)
            if request is None:
                return
            method, target, fields, body, buffer = request
            with served_lock:
                served += 1
            path = urlsplit(target).path
            if path.startswith("/api/"):
                path = path[len("/api"):]
            length = lambda data: [("Content-Length", str(len(data)))]  # noqa: E731
            if path.startswith("/echo"):
                data = json.dumps({"method": method, "target": target, "fields": fields,
                                   "body": body.decode("latin-1")}).encode()
                conn.sendall(answer("200 OK", [("Content-Type", "application/json")] + length(data), data))
            elif path == "/created":
                data = b'{"id":7}'
                conn.sendall(answer("201 Created", [
                    ("Content-Type", "application/json"), ("Location", "/items/7"),
                    ("Set-Cookie", "a=1; Path=/"), ("Set-Cookie", "b=2; Path=/"),
                    ("Cache-Control", "no-store")] + length(data), data))
            elif path == "/chunked":
                conn.sendall(answer("200 OK", [("Content-Type", "text/plain"), ("Transfer-Encoding", "chunked")],
                                    b"5\r\nhello\r\n1\r\n \r\n8\r\nchunked!\r\n0\r\nX-Trailer: t\r\n\r\n"))
            elif path == "/close":
                conn.sendall(answer("200 OK", [("Content-Type", "text/plain"), ("Connection", "close")],
                                    b"until the close"))
                return
            elif path == "/interim":
                conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n")
                conn.sendall(answer("200 OK", [("Content-Type", "text/plain")] + length(b"after"), b"after"))
            elif path == "/head-length":
                data = b"" if method == "HEAD" else b"x" * 1234
                conn.sendall(answer("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "1234")], data))
            elif path == "/not-modified":
                conn.sendall(answer("304 Not Modified", [("ETag", '"v1"')], b""))
            elif path == "/slow":
                ms = int(parse_qs(urlsplit(target).query).get("ms", ["100"])[0])
                time.sleep(ms / 1000)
                conn.sendall(answer("200 OK", [("Content-Type", "text/plain")] + length(b"slow"), b"slow"))
            elif path == "/hang":
                time.sleep(3600)
            elif path == "/reset":
                conn.sendall(answer("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "100")], b"half"))
                time.sleep(0.05)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            elif path == "/two-lengths":
                conn.sendall(answer("200 OK", [("Content-Length", "5"), ("Content-Length", "6")], b"hello!"))
            elif path == "/smuggle":
                second = answer("200 OK", [("Content-Length", "8")], b"smuggled")
                conn.sendall(answer("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "5")], b"first")
                             + second)
            elif path == "/deny":
                status = int(parse_qs(urlsplit(target).query)["status"][0])
                conn.sendall(answer(f"{status} No", [("Content-Length", "0")], b""))
            elif path in ("/big", "/big-chunked"):
                total = int(parse_qs(urlsplit(target).query)["bytes"][0])
                if path == "/big":
                    conn.sendall(answer("200 OK", [("Content-Type", "text/plain"),
                                                   ("Content-Length", str(total))], b""))
                    for block in blocks(total, 1 << 20):
                        conn.sendall(block)
                else:
                    conn.sendall(answer("200 OK", [("Content-Type", "text/plain"),
                                                   ("Transfer-Encoding", "chunked")], b""))
                    for block in blocks(total, 1 << 16):
                        conn.sendall(b"%x\r\n" % len(block) + block + b"\r\n")
                    conn.sendall(b"0\r\n\r\n")
            elif path == "/zeros":
                total = int(parse_qs(urlsplit(target).query)["bytes"][0])
                conn.sendall(answer("200 OK", [("Content-Length", str(total))], b""))
                block = bytes(1 << 16)
                start = 0
                while start < total:
                    _, writable, _ = select.select([], [conn], [], 1.0)
                    if not writable:
                        stalled.set()
                        continue
                    # Not blocking: each byte the kernel took is counted at once.
                    try:
                        sent = conn.send(block[:total - start], socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        continue
                    start += sent
                    with served_lock:
                        zeros_sent += sent
            elif path == "/stalled":
                data = b"yes" if stalled.is_set() else b"no"
                conn.sendall(answer("200 OK", [("Content-Type", "text/plain")] + length(data), data))
            elif path == "/zeros-sent":
                data = str(zeros_sent).encode()
                conn.sendall(answer("200 OK", [("Content-Type", "text/plain")] + length(data), data))
            elif path in ("/gate", "/gate-reset"):
                gate = parse_qs(urlsplit(target).query)["file"][0]
                if path == "/gate":
                    conn.sendall(answer("200 OK", [("Content-Type", "text/plain"),
                                                   ("Transfer-Encoding", "chunked")],
                                        b"b\r\nfirst part\n\r\n"))
                    wait_for(gate)
                    conn.sendall(b"9\r\nthe rest\n\r\n0\r\n\r\n")
                else:
                    conn.sendall(answer("200 OK", [("Content-Type", "text/plain"),
                                                   ("Content-Length", "100000")], b"first part\n"))
                    wait_for(gate)
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
            elif path == "/count":
                data = str(served).encode()
                conn.sendall(answer("200 OK", [("Content-Type", "text/plain")] + length(data), data))
            else:
                data = b"hello from upstream"
                conn.sendall(answer("200 OK", [("Content-Type", "text/plain")] + length(data), data))
            if any(name.lower() == "connection" and value.lower() == "close" for name, value in fields):
                return
    except OSError:
        pass
    finally:
        conn.close()


def main():
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(sys.argv[1])))
    listener.listen(1024)
    print("listening", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
