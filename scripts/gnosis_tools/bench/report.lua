-- wrk script: after the run, print wrk's totals as one JSON line that `scripts/tool bench` reads.
-- Without a request() function wrk keeps its static (fastest) request path.
-- Usage by hand: wrk -s scripts/gnosis_tools/bench/report.lua --latency -c 64 -d 5 http://127.0.0.1:8080/json

function done(summary, latency, requests)
  local e = summary.errors
  -- The `Connection: close` requests mix.lua's threads sent (it keeps them in `threads`).
  local closes = 0
  for _, thread in ipairs(threads or {}) do
    closes = closes + (thread:get("closes") or 0)
  end
  -- %.0f rather than %d: byte counts of a long plaintext run exceed 32 bits.
  io.write(string.format(
    "\nBENCH_JSON {\"duration_us\":%.0f,\"requests\":%.0f,\"bytes\":%.0f,\"closes\":%.0f," ..
    "\"errors\":{\"connect\":%.0f,\"read\":%.0f,\"write\":%.0f,\"status\":%.0f,\"timeout\":%.0f}," ..
    "\"latency_us\":{\"mean\":%.1f,\"stdev\":%.1f,\"max\":%.0f," ..
    "\"p50\":%.0f,\"p75\":%.0f,\"p90\":%.0f,\"p99\":%.0f}}\n",
    summary.duration, summary.requests, summary.bytes, closes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency.stdev, latency.max,
    latency:percentile(50), latency:percentile(75), latency:percentile(90),
    latency:percentile(99)))
end
