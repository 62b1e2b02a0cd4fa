"""The HTTP/1.1 client both verifiers read responses with: raw bytes out, whole responses in
(Content-Length or chunked), so that what the server sent is what is checked."""

import re
import socket
import time

IO_TIMEOUT = 15.0
# curl --max-time 30 in every check of HttpArena's validate.sh (snapshot 304, 326, 460).
REQUEST_TIMEOUT = 30.0


class Response:
    def __init__(self, version, status, headers, body):
        self.version = version
        self.status = status
        self.header_list = headers  # [(name, value)] as received
        self.headers = {name.lower(): value for name, value in headers}
        self.body = body

    def header(self, name):
        return self.headers.get(name.lower())


class ProtocolError(Exception):
    pass


class Connection:
    """One connection; over TLS with `tls`, an ssl.SSLContext (the handshake done here)."""

    def __init__(self, host, port, timeout=IO_TIMEOUT, tls=None):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        if tls is not None:
            try:
                self.sock = tls.wrap_socket(self.sock, server_hostname="localhost")
            except OSError:
                self.sock.close()
                raise
        self.buffer = b""

    def close(self):
        self.sock.close()

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ProtocolError("connection closed by the server")
        self.buffer += chunk

    def _read_until(self, marker):
        while marker not in self.buffer:
            self._fill()
        index = self.buffer.index(marker) + len(marker)
        data, self.buffer = self.buffer[:index], self.buffer[index:]
        return data

    def _read_exactly(self, count):
        while len(self.buffer) < count:
            self._fill()
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def read_response(self):
        head = self._read_until(b"\r\n\r\n").decode("latin-1")
        lines = head.split("\r\n")
        match = re.match(r"^(HTTP/\d\.\d) (\d{3})", lines[0])
        if not match:
            raise ProtocolError("bad status line %r" % lines[0][:80])
        headers = []
        for line in lines[1:]:
            if not line:
                continue
            name, sep, value = line.partition(":")
            if not sep:
                raise ProtocolError("bad header line %r" % line[:80])
            headers.append((name.strip(), value.strip()))
        response = Response(match.group(1), int(match.group(2)), headers, b"")
        length = response.header("content-length")
        if "chunked" in (response.header("transfer-encoding") or "").lower():
            response.body = self._read_chunked()
        elif length is not None:
            if not length.isdigit():
                raise ProtocolError("bad Content-Length %r" % length)
            response.body = self._read_exactly(int(length))
        else:
            raise ProtocolError("response has neither Content-Length nor Transfer-Encoding")
        return response

    def _read_chunked(self):
        body = b""
        while True:
            size_line = self._read_until(b"\r\n").split(b";")[0].strip()
            size = int(size_line, 16)
            if size == 0:
                self._read_until(b"\r\n")
                return body
            body += self._read_exactly(size)
            self._read_until(b"\r\n")

    def closed_by_peer(self, wait):
        """True if the server closes the connection within `wait` seconds."""
        self.sock.settimeout(wait)
        try:
            while True:
                chunk = self.sock.recv(4096)
                if not chunk:
                    return True
        except socket.timeout:
            return False
        except OSError:
            return True


class ExchangeError(Exception):
    pass


def request(method, target, headers=(), body=b""):
    lines = ["%s %s HTTP/1.1" % (method, target), "Host: localhost",
             "User-Agent: gnosis-validate-httparena", "Accept: */*"]
    lines += ["%s: %s" % pair for pair in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def exchange(host, port, fragments, timeout=REQUEST_TIMEOUT, pause=0.0, expect_close=False,
             tls=None):
    """Sends the fragments (with a pause between them) on a new TCP_NODELAY connection
    (snapshot 367), over TLS with `tls` (an ssl.SSLContext), reads one response, and, if
    asked, whether the server then closes. The response gains `elapsed` (seconds from connect
    to its last byte) and `closed`."""
    started = time.monotonic()
    try:
        connection = Connection(host, port, timeout, tls)
    except OSError as error:
        raise ExchangeError("cannot connect: %s" % error) from error
    try:
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for index, fragment in enumerate(fragments):
            if index:
                time.sleep(pause)
            connection.send(fragment)
        response = connection.read_response()
        response.elapsed = time.monotonic() - started
        response.closed = expect_close and connection.closed_by_peer(timeout)
        return response
    except socket.timeout as error:
        raise ExchangeError("timed out waiting for the server") from error
    except (OSError, ProtocolError, ValueError) as error:
        raise ExchangeError("%s: %s" % (type(error).__name__, error)) from error
    finally:
        connection.close()
