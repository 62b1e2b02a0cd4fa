-- wrk script for TFB's plaintext test: every write carries `depth` requests (TFB uses 16),
-- built like TFB's pipeline.lua by repeating wrk.format(). Also prints the JSON summary.
-- Usage by hand: wrk -s scripts/gnosis_tools/bench/pipeline.lua -c 256 -d 5 http://127.0.0.1:8080/plaintext -- 16

local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
dofile(here .. "report.lua")

function init(args)
  local depth = tonumber(args[1]) or 1
  local batch = {}
  for i = 1, depth do
    batch[i] = wrk.format()
  end
  pipelined_request = table.concat(batch)
end

function request()
  return pipelined_request
end
