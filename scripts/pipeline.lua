-- wrk script: sends `depth` copies of the request in one write (TFB's plaintext test
-- uses 16): `wrk ... -s scripts/pipeline.lua URL -- 16`.
init = function(args)
  local depth = tonumber(args[1]) or 1
  req = string.rep(wrk.format(), depth)
end

request = function()
  return req
end
