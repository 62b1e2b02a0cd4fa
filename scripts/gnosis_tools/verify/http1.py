"""The HTTP/1.1 client both verifiers read responses with: raw bytes out, whole responses in
(Content-Length or chunked), so that what the server sent is what is checked."""

import re
import socket

IO_TIMEOUT = 15.0


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
    def __init__(self, host, port, timeout=IO_TIMEOUT):
        self.sock = socket.create_connection((host, port), timeout=timeout)
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
