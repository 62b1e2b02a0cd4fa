"""A stand-in for HttpArena's shared auth service (frameworks/_shared/authsvc at 28606baf),
for the tests and the local validator, where its Rust build is not at hand: the same contract,
written here from its description.

    JWT_SECRET=... AUTHSVC_LISTEN=127.0.0.1:9090 python3 -m gnosis_tools.authsvc

`GET /_auth` with `Authorization: Bearer <header>.<payload>.<signature>`: the signature must be
HMAC-SHA256 of `header.payload` under JWT_SECRET (base64url, no padding), and the payload's JSON
must hold a `sub` claim; then 200 with `X-User-Id: <sub>`, else 401. `GET /_health` is 200.
Keep-alive HTTP/1.1, one thread per connection. Prints `listening` once it accepts.

`token(secret, sub)` makes a token it accepts, as HttpArena's data/jwt-token.txt is made.
"""

import base64
import hashlib
import hmac
import json
import os
import socket
import sys
import threading

SECRET = "httparena-bench-secret-do-not-use-in-production"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def token(secret, sub, name="Alice Chen", exp=4102444800):
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = b64url(json.dumps({"sub": sub, "name": name, "exp": exp},
                                separators=(",", ":")).encode())
    signed = f"{header}.{payload}".encode()
    signature = b64url(hmac.new(secret.encode(), signed, hashlib.sha256).digest())
    return f"{header}.{payload}.{signature}"


def user_of(secret, authorization):
    """The token's `sub`, or None when it is not one signed with `secret`."""
    if not authorization.startswith("Bearer "):
        return None
    parts = authorization[len("Bearer "):].split(".")
    if len(parts) != 3:
        return None
    try:
        signature = unb64url(parts[2])
        expected = hmac.new(secret.encode(), f"{parts[0]}.{parts[1]}".encode(),
                            hashlib.sha256).digest()
        if not hmac.compare_digest(signature, expected):
            return None
        sub = json.loads(unb64url(parts[1])).get("sub")
    except (ValueError, UnicodeDecodeError, AttributeError):
        return None
    return str(sub) if isinstance(sub, (str, int)) and str(sub).isprintable() else None


def serve(conn, secret):
    buffer = b""
    try:
        while True:
            while b"\r\n\r\n" not in buffer:
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1].split("?")[0]
            fields = {name.strip().lower(): value.strip()
                      for name, _, value in (line.partition(":") for line in lines[1:])}
            user = user_of(secret, fields.get("authorization", ""))
            if path == "/_health":
                status, extra = "200 OK", ""
            elif path == "/_auth" and user is not None:
                status, extra = "200 OK", f"X-User-Id: {user}\r\n"
            elif path == "/_auth":
                status, extra = "401 Unauthorized", ""
            else:
                status, extra = "404 Not Found", ""
            conn.sendall(f"HTTP/1.1 {status}\r\n{extra}Content-Length: 0\r\n\r\n".encode())
    except OSError:
        pass
    finally:
        conn.close()


def main():
    secret = os.environ.get("JWT_SECRET", SECRET)
    host, _, port = os.environ.get("AUTHSVC_LISTEN", "0.0.0.0:9090").rpartition(":")
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, int(port)))
    listener.listen(1024)
    print("listening", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn, secret), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
