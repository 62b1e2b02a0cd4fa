"""HttpArena's WebSocket profiles on the cleartext port: echo-ws, echo-ws-pipeline and
echo-ws-limited.

Followed: MDA2AV/HttpArena at 28606baf, scripts/validate.sh ("WebSocket Echo", run only when
the entry has the echo-ws test: the other two profiles have no checks of their own) and the
scripts/validate-ws.py it runs, with the same requests, assertions and counting (7 checks):
the upgrade of GET /ws answered 101 with the right Sec-WebSocket-Accept, a text echo, a
256-byte binary echo, five text messages sent at once echoed in order, a close (1000,
"validate done"), a plain GET /ws answered 4xx on a new connection, then a new connection
upgraded and a final "health" echo. validate-ws.py passes a reset in place of the 4xx; that
is kept.
Stricter (one check of ours): the close is answered with a close frame carrying 1000, after
which the server closes the connection (validate-ws.py reads one frame and closes).
"""

import base64
import hashlib
import os
import socket
import struct

PROFILES = ["echo-ws", "echo-ws-pipeline", "echo-ws-limited"]
PATH = "/ws"
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_TEXT, OP_BINARY, OP_CLOSE = 0x1, 0x2, 0x8


def accept_for(key):
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def send_frame(sock, opcode, payload):
    """A client frame: FIN, masked (RFC 6455 5.3)."""
    data = payload if isinstance(payload, bytes) else payload.encode()
    length = len(data)
    if length < 126:
        header = bytes([0x80 | opcode, 0x80 | length])
    elif length < 65536:
        header = bytes([0x80 | opcode, 0x80 | 126]) + struct.pack("!H", length)
    else:
        header = bytes([0x80 | opcode, 0x80 | 127]) + struct.pack("!Q", length)
    mask = os.urandom(4)
    sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed unexpectedly")
        buf += chunk
    return buf


def recv_frame(sock, timeout=5.0):
    """(opcode, payload), or (None, None) on a timeout."""
    sock.settimeout(timeout)
    try:
        head = recv_exact(sock, 2)
        length = head[1] & 0x7F
        if length == 126:
            length = struct.unpack("!H", recv_exact(sock, 2))[0]
        elif length == 127:
            length = struct.unpack("!Q", recv_exact(sock, 8))[0]
        mask = recv_exact(sock, 4) if head[1] & 0x80 else None
        payload = recv_exact(sock, length)
        if mask:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return head[0] & 0x0F, payload
    except socket.timeout:
        return None, None


def read_head(sock):
    sock.settimeout(5)
    response = b""
    while b"\r\n\r\n" not in response:
        chunk = sock.recv(4096)
        if not chunk:
            break
        response += chunk
    return response


def upgrade_request(host, port, key):
    return ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
            % (PATH, host, port, key)).encode()


class WsChecks:
    def __init__(self, validator):
        self.validator = validator
        self.host = validator.host
        self.port = validator.port

    def check(self, label, ok, detail):
        if ok:
            self.validator.ok(label, detail)
        else:
            self.validator.fail(label, detail)

    def upgrade(self):
        sock = socket.create_connection((self.host, self.port), timeout=5)
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(upgrade_request(self.host, self.port, key))
        lines = read_head(sock).decode("utf-8", errors="replace").split("\r\n")
        status_ok = "101" in lines[0]
        self.check("upgrade status 101", status_ok, lines[0].strip())
        accept = ""
        for line in lines:
            if line.lower().startswith("sec-websocket-accept:"):
                accept = line.split(":", 1)[1].strip()
        expected = accept_for(key)
        self.check("Sec-WebSocket-Accept", accept == expected,
                   "correct" if accept == expected else "expected %s, got %s" % (expected, accept))
        if not status_ok:
            sock.close()
            return None
        return sock

    def echoes(self, sock):
        message = "HttpArena-validate-%s" % os.urandom(8).hex()
        send_frame(sock, OP_TEXT, message)
        opcode, payload = recv_frame(sock)
        echoed = payload.decode() if payload else ""
        self.check("text echo", opcode == OP_TEXT and echoed == message,
                   "sent '%s', got '%s'" % (message, echoed))
        data = os.urandom(256)
        send_frame(sock, OP_BINARY, data)
        opcode, payload = recv_frame(sock)
        self.check("binary echo", opcode == OP_BINARY and payload == data,
                   "sent %d bytes, got %d bytes" % (len(data), len(payload) if payload else 0))
        messages = ["msg-%d-%s" % (i, os.urandom(4).hex()) for i in range(5)]
        for message in messages:
            send_frame(sock, OP_TEXT, message)
        for i, expected in enumerate(messages):
            opcode, payload = recv_frame(sock, timeout=3)
            echoed = payload.decode() if payload else ""
            if opcode != OP_TEXT or echoed != expected:
                self.validator.fail("multi-message %d/5" % (i + 1),
                                    "expected '%s', got '%s'" % (expected, echoed))
                return
        self.validator.ok("multi-message echo (5 msgs)", "all 5 echoed correctly")

    def close(self, sock):
        send_frame(sock, OP_CLOSE, struct.pack("!H", 1000) + b"validate done")
        try:
            opcode, payload = recv_frame(sock, timeout=3)
            closed = sock.recv(1) == b""
        except (ConnectionError, OSError):
            opcode, payload, closed = None, None, False
        sock.close()
        code = struct.unpack("!H", payload[:2])[0] if payload and len(payload) >= 2 else None
        self.check("close answered 1000, then closed (ours)",
                   opcode == OP_CLOSE and code == 1000 and closed,
                   "opcode %s, code %s, closed %s" % (opcode, code, closed))

    def plain_get(self):
        sock = socket.create_connection((self.host, self.port), timeout=5)
        sock.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: keep-alive\r\n\r\n"
                      % (PATH, self.host, self.port)).encode())
        sock.settimeout(3)
        try:
            status_line = read_head(sock).decode("utf-8", errors="replace").split("\r\n")[0]
            parts = status_line.split()
            code = int(parts[1]) if len(parts) >= 2 else 0
            self.check("reject non-upgrade GET /ws", 400 <= code < 500, "HTTP %d" % code)
        except OSError as error:
            self.validator.ok("reject non-upgrade GET /ws", "connection closed (%s)" % error)
        finally:
            sock.close()

    def alive(self):
        sock = socket.create_connection((self.host, self.port), timeout=5)
        key = base64.b64encode(os.urandom(16)).decode()
        sock.sendall(upgrade_request(self.host, self.port, key))
        healthy = b"101" in read_head(sock)
        if healthy:
            send_frame(sock, OP_TEXT, "health")
            opcode, payload = recv_frame(sock)
            healthy = opcode == OP_TEXT and payload == b"health"
            send_frame(sock, OP_CLOSE, struct.pack("!H", 1000))
            try:
                recv_frame(sock, timeout=2)
            except ConnectionError:
                pass
        sock.close()
        self.check("server alive after tests", healthy, "health echoed")

    def run(self, profiles):
        if "echo-ws" not in profiles:
            return
        out = self.validator.out
        print("[test] echo-ws endpoint (ws://%s:%d%s)" % (self.host, self.port, PATH), file=out)
        sock = self.upgrade()
        if sock is None:
            return
        self.echoes(sock)
        self.close(sock)
        self.plain_get()
        self.alive()
