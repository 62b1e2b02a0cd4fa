"""HttpArena's `static` profile (HTTP/1.1), as validate.sh checks it: MDA2AV/HttpArena at
28606baf, scripts/validate.sh, section "Static Files H1", and its docs
(site/content/docs/test-profiles/h1/isolated/static/validation.md).

`static` is a reference profile (engines are not ranked in it); gnosis serves the route for
HTTP/2's static-h2 and checks it here on HTTP/1.1. The same requests and the same counting:
three Content-Type checks (one PASS or FAIL each); the 20 files' sizes against the files on
disk (one FAIL per file, one PASS for all); the compressed answers' decoded sizes (one FAIL per
file, one PASS for all when any was compressed, else a SKIP line that counts nothing); 404 for
a missing file. Stricter: the uncompressed answers (asked without Accept-Encoding, so none
may be compressed) must be status 200 and the file's bytes, not only as long. The compression
check is validate.sh's own: `curl --compressed` (Debian 12's offers `deflate, gzip, br, zstd`
and decodes them), Content-Encoding read from its head, the decoded body's size against the
file's; a request curl could not make counts as not compressed, as there.
"""

import os

from .http1 import ExchangeError, request
from .httparena_h2 import Curl, header_values

PROFILE = "static"
# validate.sh's list of the 20 files, in its order.
FILES = ["reset.css", "layout.css", "theme.css", "components.css", "utilities.css",
         "analytics.js", "helpers.js", "app.js", "vendor.js", "router.js", "header.html",
         "footer.html", "regular.woff2", "bold.woff2", "logo.svg", "icon-sprite.svg",
         "hero.webp", "thumb1.webp", "thumb2.webp", "manifest.json"]
CONTENT_TYPES = [("reset.css", "text/css"), ("app.js", "application/javascript"),
                 ("manifest.json", "application/json")]


def default_static_dir():
    """Where the server reads the files: $STATIC_DIR, else HttpArena's mount."""
    return os.environ.get("STATIC_DIR", "/data/static")


class StaticChecks:
    def __init__(self, validator, static_dir):
        self.validator = validator
        self.static_dir = static_dir

    def on_disk(self, name):
        """The file's bytes (`wc -c < file || echo 0`: a missing file counts 0 bytes)."""
        try:
            with open(os.path.join(self.static_dir, name), "rb") as source:
                return source.read()
        except OSError:
            return b""

    def run(self):
        v = self.validator
        print("[test] static endpoint", file=v.out)
        for name, content_type in CONTENT_TYPES:
            v.check_header("GET /static/%s Content-Type" % name, content_type,
                           [request("GET", "/static/" + name)])
        self.sizes()
        self.compression()
        label = "GET /static/nonexistent.txt"
        try:
            response = v.get("/static/nonexistent.txt")
        except ExchangeError as error:
            v.fail(label, str(error))
            return
        if response.status == 404:
            v.ok(label, "HTTP 404")
        else:
            v.fail(label, "expected HTTP 404, got HTTP %d" % response.status)

    def sizes(self):
        v = self.validator
        failed = False
        for name in FILES:
            expected = self.on_disk(name)
            label = "static/%s size" % name
            try:
                response = v.get("/static/" + name)
            except ExchangeError as error:
                v.fail(label, str(error))
                failed = True
                continue
            if len(response.body) != len(expected):
                v.fail(label, "expected %d bytes, got %d" % (len(expected), len(response.body)))
                failed = True
            elif response.status != 200 or response.body != expected:
                v.fail(label, "HTTP %d, %d bytes unlike the file's" % (response.status,
                                                                      len(response.body)))
                failed = True
        if not failed:
            v.ok("static file sizes", "%d files verified" % len(FILES))

    def compression(self):
        v = self.validator
        failed = False
        compressed = skipped = 0
        for name in FILES:
            expected = len(self.on_disk(name))
            answer = Curl(["--compressed", "http://%s:%d/static/%s" % (v.host, v.port, name)])
            encodings = header_values(answer.head, "content-encoding")
            encoding = encodings[0].lower().split(" ")[0] if encodings else ""
            if not encoding:
                skipped += 1
            elif len(answer.body) == expected:
                compressed += 1
            else:
                v.fail("static/%s compression" % name,
                       "Content-Encoding: %s but decompressed size %d != expected %d"
                       % (encoding, len(answer.body), expected))
                failed = True
        if failed:
            return
        if compressed:
            v.ok("static compression", "%d files compressed, %d skipped" % (compressed, skipped))
        else:
            print("  SKIP [static compression] (server does not compress static files)",
                  file=v.out)
