"""Run an entry's gateway stack as HttpArena runs it, without Docker, and check it as
validate.sh checks it.

    scripts/tool verify gateway BINARY [--profiles gateway-64,gateway-h3,production-stack]
        [--folder httparena] [--data-dir DIR] [--certs-dir DIR] [--database-url URL]

HttpArena's gateway profiles start `compose.gateway.yml` (gateway-64) or
`compose.gateway-h3.yml` (gateway-h3) from the entry's folder with `docker compose up`, the host's
network, and CERTS_DIR, DATA_DIR and DATABASE_URL in the environment (MDA2AV/HttpArena at
28606baf, scripts/lib/gateway.sh). Here each service of the compose file runs BINARY as its
`command` says, with the `environment` it names (the variables substituted), and what its
`volumes` mount at the paths gnosis reads (/certs/server.crt and .key, /data/static,
/data/dataset.json) given through TLS_CERT, TLS_KEY, STATIC_DIR and DATASET_PATH; a path a
service does not mount is given as one that does not exist, as in its container. The ports of
the compose file (8080, 8443) are moved to free ones, the same move for every service, so that
a server already running here keeps its own.

validate.sh's `_validate_gateway` (the same at 28606baf for both profiles, over curl --http2 on
8443) has 12 checks: HTTP/2 negotiated, the Content-Types of /static/reset.css and app.js,
app.js not empty, /static/nonexistent.txt 404, /json/50 with 50 items and their totals, its
Content-Type, /async-db with 1 to 50 items of the right shape, its Content-Type, an empty range
with count 0, and /baseline2 with fixed and random numbers. Ours, labelled so: the server
listens on none of the proxy's ports (with the host's network, a server on 8443 takes some of
the proxy's connections), and for gateway-h3 the dynamic routes and a static file over HTTP/3
(aioquic), since validate.sh checks that profile over HTTP/2 only.

production-stack starts `compose.production-stack.yml` the same way. Its `authsvc` service
(`build: ../_shared/authsvc`, HttpArena's shared JWT verifier, which the harness builds from its
own tree) runs here as `gnosis_tools.authsvc`, a stand-in written to the same contract, with the
service's environment; its `cache` service (a `redis` image) runs as Debian's redis-server with
the service's command. validate.sh's `_validate_production_stack` (28606baf) has 15 checks: HTTP/2 negotiated,
/static/reset.css's Content-Type, app.js not empty, /public/baseline with fixed and random
numbers, /public/json/25's items and totals, 401 for GET and POST /api/items/1 with no token and
with a bogus one, /api/items/1 with the token, /api/items/7 MISS then HIT, POST /api/items/2
204, item 3 MISS after a POST, /api/me user 42. The token is made as HttpArena's
data/jwt-token.txt is (sub 42, its secret). Ours: the server listens on none of the edge's
ports; and, not a check, the rows the POSTs changed are put back through the same API after.

Prints PASS / FAIL per check and "=== Results: N passed, M failed ===" per profile; exits 1 on
any FAIL.
"""

import asyncio
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .. import ROOT, authsvc
from ..system import listening_inodes, socket_inodes_of, stop_process_group
from .httparena_h2 import Curl, header_values

PROFILES = ["gateway-64", "gateway-h3", "production-stack"]
COMPOSE = {"gateway-64": "compose.gateway.yml", "gateway-h3": "compose.gateway-h3.yml",
           "production-stack": "compose.production-stack.yml"}
# Where the entry's container reads what a volume may mount, and the variable that tells
# gnosis the path instead.
MOUNTED = {"/certs": ("TLS_CERT", "server.crt"), "/data/static": ("STATIC_DIR", None),
           "/data/dataset.json": ("DATASET_PATH", None)}
# The ports the compose files name: HTTP/1.1 behind, TLS and QUIC in front, the auth service,
# Redis.
PORTS = (8080, 8443, 9090, 6379)
# The service HttpArena builds from its own tree, and what stands for it here.
AUTHSVC_BUILD = "../_shared/authsvc"


def free_port():
    with socket.socket() as tcp, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        for _ in range(100):
            tcp.bind(("127.0.0.1", 0))
            port = tcp.getsockname()[1]
            try:
                udp.bind(("127.0.0.1", port))  # free for QUIC too
                return port
            except OSError:
                tcp.close()
                tcp = socket.socket()
    raise OSError("no port free for both TCP and UDP")


def substitute(text, env):
    """Compose's ${VAR} interpolation (an unset variable is empty, as compose has it)."""
    return re.sub(r"\$\{(\w+)\}", lambda match: env.get(match.group(1), ""), text)


class Service:
    """One service of the compose file, as a process of BINARY."""

    def __init__(self, name, spec, binary, env, ports, scratch):
        self.name = name
        # A port wherever it is named: alone, or in an address (--upstream 127.0.0.1:8080).
        move = lambda text: re.sub(r"(?<!\d)\d+(?!\d)",  # noqa: E731
                                   lambda match: str(ports.get(int(match.group()), match.group())), text)
        command = spec.get("command")
        if spec.get("build") == AUTHSVC_BUILD:
            self.argv = [sys.executable, "-m", "gnosis_tools.authsvc"]
        elif str(spec.get("image", "")).startswith("redis:") and command and command[0] == "redis-server":
            self.argv = ["redis-server"] + [move(arg) for arg in command[1:]]
        elif command and command[0] == "/server":
            self.argv = [str(binary)] + [move(arg) for arg in command[1:]]
        else:
            raise ValueError("service %s: its command must run /server (the image's binary), or "
                             "redis-server in a redis image, or it must be %s" % (name, AUTHSVC_BUILD))
        self.env = {key: value for key, value in os.environ.items()
                    if key not in ("TLS_CERT", "TLS_KEY", "STATIC_DIR", "DATASET_PATH", "DATABASE_URL",
                                   "DATABASE_MAX_CONN")}  # fmt: skip
        self.env["PYTHONPATH"] = str(ROOT / "scripts")
        for entry in spec.get("environment", []):
            key, _, value = substitute(entry, env).partition("=")
            self.env[key] = move(value) if key in ("AUTHSVC_LISTEN", "REDIS_URL") else value
        mounts = {}
        for volume in spec.get("volumes", []):
            host, container = substitute(volume, env).split(":")[:2]
            mounts[container] = host
        missing = Path(scratch) / "not-mounted"
        for path, (variable, file) in MOUNTED.items():
            where = Path(mounts.get(path, missing / path.strip("/")))
            self.env[variable] = str(where / file) if file else str(where)
        self.env["TLS_KEY"] = str(Path(self.env["TLS_CERT"]).with_name("server.key"))
        self.log = Path(scratch) / ("%s.log" % name)
        self.process = None

    def start(self):
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(self.argv, env=self.env, stdout=log, stderr=log,
                                            start_new_session=True)

    def stop(self):
        if self.process is not None:
            stop_process_group(self.process)

    def listens_on(self, port):
        return bool(listening_inodes(port) & socket_inodes_of(self.process.pid))


class Stack:
    """A compose file's services, started in their `depends_on` order, stopped together."""

    def __init__(self, compose, binary, env, scratch):
        import yaml  # PyYAML: here only, for the compose files

        spec = yaml.safe_load(Path(compose).read_text())["services"]
        self.ports = {port: free_port() for port in PORTS}
        self.services = {name: Service(name, service, binary, env, self.ports, scratch)
                         for name, service in spec.items()}
        self.order = []
        while len(self.order) < len(spec):
            for name, service in spec.items():
                if name not in self.order and all(d in self.order for d in service.get("depends_on", [])):
                    self.order.append(name)

    def __enter__(self):
        for name in self.order:
            self.services[name].start()
        return self

    def __exit__(self, *_):
        for name in reversed(self.order):
            self.services[name].stop()


class GatewayChecks:
    def __init__(self, port, rng, out=sys.stdout):
        self.base = "https://localhost:%d" % port
        self.port = port
        self.rng = rng
        self.out = out
        self.passed, self.failed = 0, []

    def ok(self, label, detail=""):
        self.passed += 1
        print("  PASS [%s]%s" % (label, " (%s)" % detail if detail != "" else ""), file=self.out)

    def fail(self, label, why):
        self.failed.append(label)
        print("  FAIL [%s]: %s" % (label, why), file=self.out)

    def expect(self, label, ok, detail, why):
        (self.ok(label, detail) if ok else self.fail(label, why))

    def get(self, path):
        return Curl(["-k", "--http2", self.base + path])

    def wait(self, seconds=30):
        """validate.sh: up to 30 tries, a second apart, of /static/reset.css over h2."""
        for _ in range(seconds):
            if self.get("/static/reset.css").status != "000":
                return True
            time.sleep(1)
        return False

    def content_type(self, label, path, expected):
        got = header_values(self.get(path).head, "content-type")
        value = got[0] if len(got) == 1 else None
        normal = (value or "").replace("text/javascript", "application/javascript")
        self.expect(label, value is not None and (normal == expected or normal.startswith(expected + ";")),
                    "Content-Type: %s" % value, "expected Content-Type '%s', got %r" % (expected, got))  # fmt: skip

    def run(self):
        answer = self.get("/static/reset.css")
        self.expect("gateway HTTP/2 negotiation", answer.version == "2", "HTTP/%s" % answer.version,
                    "got HTTP/%s" % answer.version)
        self.content_type("gateway /static/reset.css Content-Type", "/static/reset.css", "text/css")
        self.content_type("gateway /static/app.js Content-Type", "/static/app.js", "application/javascript")
        size = len(self.get("/static/app.js").body)
        self.expect("gateway static file size", size > 0, "%d bytes" % size,
                    "empty response for /static/app.js")
        status = self.get("/static/nonexistent.txt").status
        self.expect("gateway /static/nonexistent.txt", status == "404", "HTTP %s" % status,
                    "expected HTTP 404, got HTTP %s" % status)
        self.expect_json_items("gateway /json", self.get("/json/50").body)
        self.content_type("gateway /json Content-Type", "/json/50", "application/json")
        self.expect_async_db("gateway /async-db", self.get("/async-db?min=10&max=50&limit=50").body)
        self.content_type("gateway /async-db Content-Type", "/async-db?min=10&max=50&limit=50",
                          "application/json")
        self.expect_empty("gateway /async-db empty range", self.get("/async-db?min=9999&max=9999&limit=50").body)
        a, b = self.rng.randint(100, 999), self.rng.randint(100, 999)
        for x, y, label in [(13, 42, "gateway /baseline2?a=13&b=42"),
                            (a, b, "gateway /baseline2?a=%d&b=%d (random)" % (a, b))]:
            self.expect_sum(label, self.get("/baseline2?a=%d&b=%d" % (x, y)).body, x + y)

    def expect_json_items(self, label, body, expected=50):
        try:
            d = json.loads(body)
            items = d.get("items", [])
            count, totals = d.get("count", 0), bool(items) and all("total" in item for item in items)
            correct = all(abs(item.get("total", 0) - round(item["price"] * item["quantity"], 2)) <= 0.02
                          for item in items)  # fmt: skip
        except (ValueError, TypeError, KeyError, AttributeError):
            count, totals, correct = 0, False, False
        self.expect(label, count == expected and totals and correct, "%d items, totals correct" % expected,
                    "count=%s, has_total=%s, correct=%s" % (count, totals, correct))

    def expect_async_db(self, label, body):
        try:
            d = json.loads(body)
            items = d.get("items", [])
            count = d.get("count", 0)
            shape = bool(items) and all(
                "score" in item.get("rating", {}) and isinstance(item.get("tags"), list)
                and isinstance(item.get("active"), bool) for item in items)  # fmt: skip
        except (ValueError, TypeError, AttributeError):
            count, shape = 0, False
        self.expect(label, 0 < count <= 50 and shape, "%s items, correct structure" % count,
                    "count=%s, structure right: %s" % (count, shape))

    def expect_empty(self, label, body):
        try:
            count = json.loads(body).get("count", "-1")
        except (ValueError, AttributeError):
            count = "-1"
        self.expect(label, count == 0, "count=0", "expected count=0, got %s" % count)

    def expect_sum(self, label, body, total):
        # validate.sh compares the last line of curl's output.
        last = body.decode("latin-1").split("\n")[-1]
        self.expect(label, last == str(total), "", "expected body '%d', got %r" % (total, last[:40]))

    def over_quic(self):
        """Ours: the same routes over HTTP/3, which validate.sh checks over HTTP/2 only."""
        paths = ["/baseline2?a=13&b=42", "/json/50", "/async-db?min=10&max=50&limit=50", "/static/reset.css",
                 "/static/nonexistent.txt"]  # fmt: skip
        try:
            from .. import h3_client  # aioquic is needed by these checks only

            got = asyncio.run(h3_client.exchange(self.port, [("GET", p, None) for p in paths], host="127.0.0.1"))
            answers = got["answers"]
        except Exception as error:  # aioquic missing, or the exchange failed: say which
            return self.fail("gateway over HTTP/3 (ours)", "aioquic's exchange failed: %r" % (error,))
        body = [answer.get("body", "").encode("latin-1") for answer in answers]
        self.expect_sum("gateway /baseline2?a=13&b=42 over HTTP/3 (ours)", body[0], 55)
        self.expect_json_items("gateway /json over HTTP/3 (ours)", body[1])
        self.expect_async_db("gateway /async-db over HTTP/3 (ours)", body[2])
        css = h3_client.header(answers[3], "content-type")
        self.expect("gateway /static/reset.css Content-Type over HTTP/3 (ours)", css == "text/css", css,
                    "expected text/css, got %r" % css)
        status = h3_client.header(answers[4], ":status")
        self.expect("gateway /static/nonexistent.txt over HTTP/3 (ours)", status == "404", status,
                    "expected 404, got %s" % status)


class ProductionChecks(GatewayChecks):
    """validate.sh's `_validate_production_stack`, check for check."""

    def __init__(self, port, rng, token, out=sys.stdout):
        super().__init__(port, rng, out)
        self.bearer = "Authorization: Bearer %s" % token

    def api(self, path, *extra):
        return Curl(["-k", "--http2", "-H", self.bearer] + list(extra) + [self.base + path])

    def post(self, path, body, *authorization):
        return Curl(["-k", "--http2", "-X", "POST", "-H", "Content-Type: application/json"]
                    + list(authorization) + ["-d", body, self.base + path])

    def x_cache(self, path):
        got = header_values(self.api(path).head, "x-cache")
        return got[0] if got else ""

    def json_field(self, answer, name):
        try:
            return json.loads(answer.body).get(name, "-1")
        except (ValueError, AttributeError):
            return "-1"

    def run(self):
        label = "production-stack"
        answer = self.get("/static/reset.css")
        self.expect("%s HTTP/2 negotiation" % label, answer.version == "2", "HTTP/%s" % answer.version,
                    "got HTTP/%s" % answer.version)
        self.content_type("%s /static/reset.css Content-Type" % label, "/static/reset.css", "text/css")
        size = len(self.get("/static/app.js").body)
        self.expect("%s static file size" % label, size > 0, "%d bytes" % size, "empty response for /static/app.js")
        a, b = self.rng.randint(100, 999), self.rng.randint(100, 999)
        for x, y, name in [(13, 42, "/public/baseline?a=13&b=42"),
                           (a, b, "/public/baseline?a=%d&b=%d (random)" % (a, b))]:
            self.expect_sum("%s %s" % (label, name), self.get("/public/baseline?a=%d&b=%d" % (x, y)).body, x + y)
        self.expect_json_items("%s /public/json/25" % label, self.get("/public/json/25").body, 25)
        bogus = ["-H", "Authorization: Bearer invalid.token.here"]
        walls = [("GET /api/items no-token", Curl(["-k", "--http2", self.base + "/api/items/1"])),
                 ("GET /api/items bogus-cookie", Curl(["-k", "--http2"] + bogus + [self.base + "/api/items/1"])),
                 ("POST /api/items no-token", self.post("/api/items/1", '{"name":"unauth","price":1,"quantity":1}')),
                 ("POST /api/items bogus-cookie",
                  self.post("/api/items/1", '{"name":"unauth","price":1,"quantity":1}', *bogus))]
        for name, answer in walls:
            self.expect("%s %s" % (label, name), answer.status == "401", "", "expected HTTP 401, got %s" % answer.status)
        item = self.json_field(self.api("/api/items/1"), "id")
        self.expect("%s /api/items/1" % label, item == 1, "authenticated, returned id=1",
                    "expected id=1, got %s" % item)
        first, second = self.x_cache("/api/items/7"), self.x_cache("/api/items/7")
        self.expect("%s cache-aside" % label, (first, second) == ("MISS", "HIT"), "first=MISS, second=HIT",
                    "expected first=MISS second=HIT, got first='%s' second='%s'" % (first, second))
        status = self.post("/api/items/2", '{"name":"validate-updated","price":777,"quantity":99}',
                           "-H", self.bearer).status
        self.expect("%s POST /api/items/2" % label, status == "204", "204 No Content",
                    "expected 204, got %s" % status)
        self.api("/api/items/3")
        self.post("/api/items/3", '{"name":"validate-invalidated","price":111,"quantity":22}', "-H", self.bearer)
        after = self.x_cache("/api/items/3")
        self.expect("%s POST invalidation" % label, after == "MISS", "GET after POST shows MISS",
                    "expected MISS after POST, got '%s'" % after)
        user = self.json_field(self.api("/api/me"), "id")
        self.expect("%s /api/me" % label, user == 42, "authenticated, returned user 42",
                    "expected user id 42, got %s" % user)

    def wait_for_auth(self, seconds=30):
        """Ours: the auth service and the server up (a stand-in starts in its own time)."""
        for _ in range(seconds * 10):
            if self.api("/api/me").status == "200":
                return
            time.sleep(0.1)

    def rows(self, ids):
        """The items `ids` as the API gives them, to be put back after the POSTs."""
        rows = {}
        for id in ids:
            try:
                rows[id] = json.loads(self.api("/api/items/%d" % id).body)
            except ValueError:
                pass  # not as it should be: the checks will say so
        return rows

    def put_back(self, rows):
        for id, row in rows.items():
            if isinstance(row, dict) and {"name", "price", "quantity"} <= row.keys():
                body = json.dumps({key: row[key] for key in ("name", "price", "quantity")})
                self.post("/api/items/%d" % id, body, "-H", self.bearer)


def check_profile(profile, args, out=sys.stdout):
    compose = Path(args.folder) / COMPOSE[profile]
    env = {"CERTS_DIR": str(args.certs_dir), "DATA_DIR": str(args.data_dir),
           "DATABASE_URL": args.database_url or ""}  # fmt: skip
    print("[test] %s endpoints (%s, %s)" % (profile, compose, args.binary), file=out)
    with tempfile.TemporaryDirectory() as scratch, Stack(compose, args.binary, env, scratch) as stack:
        front = stack.ports[8443]
        rng = random.Random(args.seed)
        production = profile == "production-stack"
        if production:
            secret = stack.services["authsvc"].env.get("JWT_SECRET", authsvc.SECRET)
            checks = ProductionChecks(front, rng, authsvc.token(secret, "42"), out)
        else:
            checks = GatewayChecks(front, rng, out)
        if not checks.wait():
            checks.fail(profile, "Gateway HTTPS port %d not responding after 30s" % front)
        else:
            if production:
                # validate.sh waits 60 s (the Redis seed may take its time); ours came up by now.
                checks.wait_for_auth()
                rows = checks.rows([2, 3])
            checks.run()
            if production:
                checks.put_back(rows)
            server = stack.services.get("server")
            held = [port for port in (front,) if server and server.listens_on(port)]
            checks.expect("the server listens on none of the proxy's ports (ours)", not held, "",
                          "the server listens on %s" % held)
            if profile == "gateway-h3":
                checks.over_quic()
        if checks.failed:
            for service in stack.services.values():
                print("  %s's log:\n%s" % (service.name, service.log.read_text(errors="replace")[-2000:]), file=out)
    print("=== Results: %d passed, %d failed ===" % (checks.passed, len(checks.failed)), file=out)
    return not checks.failed


def add_arguments(parser):
    parser.add_argument("binary", help="the binary every service runs as /server")
    parser.add_argument("--profiles", default=",".join(PROFILES), help="of: %s" % ", ".join(PROFILES))
    parser.add_argument("--folder", default=ROOT / "httparena",
                        help="where the compose files are (default: httparena/, which the export copies)")
    parser.add_argument("--certs-dir", required=True, help="CERTS_DIR: server.crt and server.key")
    parser.add_argument("--data-dir", required=True, help="DATA_DIR: static/ and dataset.json")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"),
                        help="DATABASE_URL (default: the environment's)")
    parser.add_argument("--seed", type=int, help="for the random numbers (default: random)")


def run(args):
    profiles = [name.strip() for name in args.profiles.split(",") if name.strip()]
    unknown = sorted(set(profiles) - set(PROFILES))
    if unknown:
        print("verify gateway: unknown profile(s) %s; known: %s" % (", ".join(unknown), ", ".join(PROFILES)),
              file=sys.stderr)  # fmt: skip
        return 2
    results = [check_profile(profile, args) for profile in profiles]
    return 0 if all(results) else 1
