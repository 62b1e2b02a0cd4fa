"""The gateway stacks (httparena/compose.gateway.yml, compose.production-stack.yml) against
HttpArena's rules for them, `verify gateway`'s reading of a compose file into processes, and
the auth service's stand-in."""

import tempfile
import unittest
from pathlib import Path

import yaml

from gnosis_tools import ROOT, authsvc
from gnosis_tools.verify import httparena_gateway as gateway

COMPOSE = ROOT / "httparena" / "compose.gateway.yml"
PRODUCTION = ROOT / "httparena" / "compose.production-stack.yml"


def cpus(cpuset):
    """The CPUs of a cpuset string ("0-23,64-87")."""
    found = set()
    for part in cpuset.split(","):
        first, _, last = part.partition("-")
        found |= set(range(int(first), int(last or first) + 1))
    return found


class Compose(unittest.TestCase):
    """gateway-h2/implementation.md: exactly two services named proxy and server, each with
    the host's network, a cpuset, seccomp unconfined, memlock and nofile limits, and the
    harness's CERTS_DIR, DATA_DIR and DATABASE_URL rather than paths of its own."""

    def setUp(self):
        self.services = yaml.safe_load(COMPOSE.read_text())["services"]

    def test_two_services_with_the_settings_every_service_must_have(self):
        self.assertEqual(sorted(self.services), ["proxy", "server"])
        for name, service in self.services.items():
            self.assertEqual(service["network_mode"], "host", name)
            self.assertIn("seccomp:unconfined", service["security_opt"], name)
            self.assertEqual(service["ulimits"]["memlock"], -1, name)
            self.assertEqual(service["ulimits"]["nofile"], {"soft": 1048576, "hard": 1048576}, name)
            self.assertEqual(service["build"], ".", name)  # the folder's image: its own binary
        proxy, server = cpus(self.services["proxy"]["cpuset"]), cpus(self.services["server"]["cpuset"])
        self.assertFalse(proxy & server)
        self.assertEqual(proxy | server, set(range(0, 32)) | set(range(64, 96)))  # the profile's cpuset

    def test_the_proxy_alone_terminates_tls_and_serves_static_and_the_server_holds_no_port_of_its(self):
        proxy, server = self.services["proxy"], self.services["server"]
        self.assertEqual(proxy["volumes"], ["${CERTS_DIR}:/certs:ro", "${DATA_DIR}/static:/data/static:ro"])
        self.assertEqual(proxy["depends_on"], ["server"])
        self.assertEqual(server["volumes"], ["${DATA_DIR}/dataset.json:/data/dataset.json:ro"])
        self.assertIn("DATABASE_URL=${DATABASE_URL}", server["environment"])
        options = lambda command: dict(zip(command[1::2], command[2::2]))  # noqa: E731
        front, back = options(proxy["command"]), options(server["command"])
        self.assertEqual(front["--upstream"], "127.0.0.1:8080")
        # No cleartext listener on the proxy: nothing forwarded to 8080 can reach it.
        self.assertEqual([front[flag] for flag in ("--port", "--tls-port", "--h2c-port")], ["0", "0", "0"])
        self.assertEqual((front["--h2-tls-port"], front["--h3-port"]), ("8443", "8443"))
        self.assertEqual(back["--port"], "8080")
        self.assertNotIn("8443", server["command"])


class Stack(unittest.TestCase):
    def test_each_service_runs_the_binary_on_the_moved_ports_with_what_it_mounts_and_nothing_else(self):
        env = {"CERTS_DIR": "/c", "DATA_DIR": "/d", "DATABASE_URL": "postgres://u@h/db"}
        with tempfile.TemporaryDirectory() as scratch:
            stack = gateway.Stack(COMPOSE, "/bin/gnosis", env, scratch)
            self.assertEqual(stack.order, ["server", "proxy"])
            front, back = stack.ports[8443], stack.ports[8080]
            self.assertNotIn(front, (8443, back))
            proxy, server = stack.services["proxy"], stack.services["server"]
            self.assertEqual(proxy.argv[:3], ["/bin/gnosis", "--upstream", "127.0.0.1:%d" % back])
            self.assertEqual(proxy.argv.count("0"), 3)
            self.assertIn(str(front), proxy.argv)
            self.assertIn(str(back), server.argv)
            self.assertEqual((proxy.env["TLS_CERT"], proxy.env["TLS_KEY"]), ("/c/server.crt", "/c/server.key"))
            self.assertEqual(proxy.env["STATIC_DIR"], "/d/static")
            self.assertEqual(server.env["DATASET_PATH"], "/d/dataset.json")
            self.assertEqual(server.env["DATABASE_URL"], "postgres://u@h/db")
            # What a container does not mount, it does not find.
            for name in ("TLS_CERT", "STATIC_DIR"):
                self.assertTrue(server.env[name].startswith(scratch), name)
                self.assertFalse(Path(server.env[name]).exists(), name)
            self.assertNotIn("DATABASE_URL", proxy.env)


class ProductionStack(unittest.TestCase):
    """production-stack/implementation.md: the edge in front (TLS, static, the auth sub-request
    for /api/), HttpArena's authsvc built as it is with its secret, the server on 8080 alone;
    the settings every service must have; the 64 CPUs split without overlap."""

    def setUp(self):
        self.services = yaml.safe_load(PRODUCTION.read_text())["services"]

    def test_the_edge_asks_the_shared_authsvc_and_forwards_to_the_server(self):
        self.assertEqual(sorted(self.services), ["authsvc", "cache", "edge", "server"])
        edge, auth, server = (self.services[name] for name in ("edge", "authsvc", "server"))
        self.assertEqual(auth["build"], gateway.AUTHSVC_BUILD)
        self.assertIn("AUTHSVC_LISTEN=0.0.0.0:9090", auth["environment"])
        self.assertIn("JWT_SECRET=%s" % authsvc.SECRET, auth["environment"])
        options = lambda command: dict(zip(command[1::2], command[2::2]))  # noqa: E731
        front = options(edge["command"])
        self.assertEqual((front["--upstream"], front["--auth"]), ("127.0.0.1:8080", "127.0.0.1:9090/_auth"))
        self.assertEqual((front["--auth-prefix"], front["--auth-fields"]), ("/api/", "X-User-Id"))
        self.assertEqual([front[flag] for flag in ("--port", "--tls-port", "--h2c-port")], ["0", "0", "0"])
        self.assertEqual(options(server["command"])["--port"], "8080")
        self.assertIn("REDIS_URL=redis://127.0.0.1:6379", server["environment"])
        self.assertEqual(self.services["cache"]["image"], "redis:7-alpine")
        self.assertNotIn("8443", server["command"])
        used = set()
        for name, service in self.services.items():
            self.assertEqual(service["network_mode"], "host", name)
            self.assertIn("seccomp:unconfined", service["security_opt"], name)
            self.assertEqual(service["ulimits"]["nofile"], {"soft": 1048576, "hard": 1048576}, name)
            self.assertFalse(cpus(service["cpuset"]) & used, name)
            used |= cpus(service["cpuset"])
        self.assertEqual(used, set(range(0, 32)) | set(range(64, 96)))

    def test_the_authsvc_service_runs_as_the_stand_in_on_the_moved_port(self):
        env = {"CERTS_DIR": "/c", "DATA_DIR": "/d", "DATABASE_URL": "postgres://u@h/db"}
        with tempfile.TemporaryDirectory() as scratch:
            stack = gateway.Stack(PRODUCTION, "/bin/gnosis", env, scratch)
            auth = stack.services["authsvc"]
            self.assertEqual(auth.argv[1:], ["-m", "gnosis_tools.authsvc"])
            self.assertEqual(auth.env["AUTHSVC_LISTEN"], "0.0.0.0:%d" % stack.ports[9090])
            self.assertIn("127.0.0.1:%d/_auth" % stack.ports[9090], stack.services["edge"].argv)
            self.assertEqual(stack.order.index("edge"), 3)
            cache, server = stack.services["cache"], stack.services["server"]
            self.assertEqual(cache.argv[:3], ["redis-server", "--bind", "127.0.0.1"])
            self.assertIn(str(stack.ports[6379]), cache.argv)
            self.assertEqual(server.env["REDIS_URL"], "redis://127.0.0.1:%d" % stack.ports[6379])


class AuthService(unittest.TestCase):
    """The stand-in's contract: HMAC-SHA256 of header.payload under the secret, a sub claim."""

    def test_a_token_signed_with_the_secret_names_its_user_and_nothing_else_does(self):
        token = authsvc.token("s3cret", "42")
        self.assertEqual(authsvc.user_of("s3cret", "Bearer " + token), "42")
        header, payload, signature = token.split(".")
        for bad in ["", token, "Bearer " + authsvc.token("other", "42"), "Bearer invalid.token.here",
                    "Bearer %s.%s.%s" % (header, authsvc.b64url(b'{"sub":"1"}'), signature),
                    "Bearer %s.%s" % (header, payload), "Bearer %s.%s.%s" % (header, payload, "!!")]:
            self.assertIsNone(authsvc.user_of("s3cret", bad), bad)


if __name__ == "__main__":
    unittest.main()
