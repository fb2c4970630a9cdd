-- wrk script for scripts/bench: every request is made as a random benchmark user.
--
-- Environment:
--   TOKENS_FILE  access tokens, one per line (required)
--   BENCH_PATH   request path (default /v1/wallet)
--   BENCH_METHOD GET or POST (default GET)
--   BENCH_NONCE  unique per wrk invocation; POST requests get a fresh Idempotency-Key
--                "<nonce>-<thread>-<counter>-<random>", so no request ever replays another
--
-- Requests are pre-rendered per user in init(); a POST only appends its key, so the Lua side costs
-- about as little as run.sh's debit.lua.
local path = os.getenv("BENCH_PATH") or "/v1/wallet"
local method = os.getenv("BENCH_METHOD") or "GET"
local nonce = os.getenv("BENCH_NONCE") or tostring(os.time())
local tokens_file = os.getenv("TOKENS_FILE") or error("TOKENS_FILE is not set")

local threads = 0
function setup(thread)
  threads = threads + 1
  thread:set("id", threads)
end

local prefixes, suffixes, count = {}, {}, 0
local counter = 0
local marker = "@@IDEMPOTENCY-KEY@@"

function init(args)
  math.randomseed(os.time() + 7919 * (id or 0) + #nonce)
  for line in io.lines(tokens_file) do
    local token = line:match("^%s*(.-)%s*$")
    if token ~= "" then
      local headers = { ["Authorization"] = "Bearer " .. token }
      if method == "POST" then
        headers["Content-Length"] = "0"
        headers["Idempotency-Key"] = marker
      end
      local text = wrk.format(method, path, headers)
      count = count + 1
      if method == "POST" then
        local at = text:find(marker, 1, true)
        prefixes[count] = text:sub(1, at - 1)
        suffixes[count] = text:sub(at + #marker)
      else
        prefixes[count] = text
      end
    end
  end
  if count == 0 then error("no tokens in " .. tokens_file) end
end

function request()
  local i = math.random(1, count)
  if method ~= "POST" then return prefixes[i] end
  counter = counter + 1
  return prefixes[i] .. nonce .. "-" .. (id or 0) .. "-" .. counter .. "-"
    .. string.format("%x", math.random(0, 0x7fffffff)) .. suffixes[i]
end
