-- wrk script for scripts/bench: POST /v1/sync/push batches as a random benchmark user.
--
-- Environment:
--   TOKENS_FILE       access tokens, one per line (required)
--   BENCH_NONCE       unique per wrk invocation: every request is a fresh installation (clientId
--                     "<nonce>-<thread>-<counter>") pushing mutation ids 1..BENCH_BATCH, each a put of a new document
--   BENCH_COLLECTION  the collection (default bench.logs, range key `date`)
--   BENCH_BATCH       mutations per push (default 100)
local nonce = os.getenv("BENCH_NONCE") or tostring(os.time())
local collection = os.getenv("BENCH_COLLECTION") or "bench.logs"
local batch = tonumber(os.getenv("BENCH_BATCH") or "100")
local tokens_file = os.getenv("TOKENS_FILE") or error("TOKENS_FILE is not set")

local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end

local tokens, count, counter = {}, 0, 0

function init(args)
  math.randomseed(os.time() + 7919 * (id or 0) + #nonce)
  for line in io.lines(tokens_file) do
    local token = line:match("^%s*(.-)%s*$")
    if token ~= "" then
      count = count + 1
      tokens[count] = token
    end
  end
  if count == 0 then error("no tokens in " .. tokens_file) end
end

function request()
  counter = counter + 1
  local client = string.format("bench-%s-%d-%d", nonce, id or 0, counter)
  local parts = {}
  for i = 1, batch do
    parts[i] = string.format(
      '{"id":%d,"op":"put","collection":"%s","docId":"p%d-%d-%d","data":{"date":"2026-11-%02d","n":%d}}',
      i, collection, id or 0, counter, i, 1 + (counter + i) % 28, i)
  end
  local body = '{"clientId":"' .. client .. '","mutations":[' .. table.concat(parts, ",") .. "]}"
  local headers = {
    ["Authorization"] = "Bearer " .. tokens[math.random(1, count)],
    ["Content-Type"] = "application/json",
  }
  return wrk.format("POST", "/v1/sync/push", headers, body)
end
