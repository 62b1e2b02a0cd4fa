-- wrk script for HttpArena's mixed profiles: sends the raw requests given after `--` in turn
-- (per wrk thread), and, when the first argument N is above 0, makes every Nth request of a
-- thread a `Connection: close` one, so that the server closes that connection and wrk opens a
-- new one. Also prints the JSON summary (report.lua).
--
-- Each request is one argument, its line ends written as the four characters \r\n (so that the
-- command can be copied into a shell). `scripts/tool bench` builds them; by hand, for HttpArena's
-- limited-conn mix (one request in flight per connection, a new connection every 10 requests):
--   wrk -s scripts/gnosis_tools/bench/mix.lua -c 512 -d 5 http://127.0.0.1:8080 -- 10 \
--     'GET /baseline11?a=13&b=42 HTTP/1.1\r\nHost: localhost\r\n\r\n' \
--     'POST /baseline11?a=13&b=42 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n20'
--
-- wrk's Lua sees no connection, only its thread: a connection is closed after 10 requests on
-- average (1 request in 10 closes one), not after exactly 10 as HttpArena's gcannon -r 10 does;
-- and only a server that closes on `Connection: close` gets new connections (`scripts/tool bench` counts
-- the connections opened to tell). A server may close without saying so in its answer (RFC 9112:
-- it SHOULD say it); wrk counts that as a read error: the summary says how many closes were asked.

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "report.lua")

threads = {}

function setup(thread)
  threads[#threads + 1] = thread
end

function init(args)
  close_every = tonumber(args[1]) or 0
  keep, close = {}, {}
  for i = 2, #args do
    local raw = args[i]:gsub("\\r\\n", "\r\n")
    local line_end = raw:find("\r\n", 1, true)
    keep[#keep + 1] = raw
    close[#close + 1] = raw:sub(1, line_end + 1) .. "Connection: close\r\n" .. raw:sub(line_end + 2)
  end
  if #keep == 0 then
    error("mix.lua: give N and at least one request after --")
  end
  sent, closes = 0, 0
end

function request()
  sent = sent + 1
  local i = (sent - 1) % #keep + 1
  if close_every > 0 and sent % close_every == 0 then
    closes = closes + 1
    return close[i]
  end
  return keep[i]
end
