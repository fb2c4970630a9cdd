-- wrk script for scripts/bench: POST /v1/purchases/apple with transactions signed by `tally-dev bench-purchases sign`.
--
-- Environment:
--   PURCHASES_FILE   lines `userId<TAB>transactionId<TAB>accessToken<TAB>JWS` (required)
--   PURCHASE_FROM    first line used (0-based; default 0)
--   PURCHASE_COUNT   how many lines from there (default: all the rest)
--   PURCHASE_MODE    new: every request a transaction not sent before, each line once (the threads take turns); when
--                    a thread has sent all of its lines it stops (wrk's req/s is over the time it ran, and done()
--                    says so). replay: a random line of the range each request (transactions redeemed before).
--   BENCH_THREADS    wrk's -t (new: thread i sends lines i, i + threads, …)
--
-- Requests are rendered in init(), so the Lua side costs a table lookup a request. done() prints how many lines the
-- threads handed out (new) and whether any ran out, for scripts/bench's books and report.
local file = os.getenv("PURCHASES_FILE") or error("PURCHASES_FILE is not set")
local from = tonumber(os.getenv("PURCHASE_FROM") or "0")
local limit = tonumber(os.getenv("PURCHASE_COUNT") or "-1")
local mode = os.getenv("PURCHASE_MODE") or "new"
local nthreads = tonumber(os.getenv("BENCH_THREADS") or "1")

local all = {}
local counter = 0
function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
  all[counter] = thread
end

requests, count, sent, exhausted = {}, 0, 0, 0
local fallback

function init(args)
  math.randomseed(os.time() + 7919 * (id or 0))
  local mine = (id or 1) - 1
  local index = 0
  for line in io.lines(file) do
    if index >= from and (limit < 0 or index < from + limit) then
      local slot = index - from
      if mode ~= "new" or slot % nthreads == mine then
        local token, jws = line:match("^[^\t]*\t[^\t]*\t([^\t]*)\t([^\t]*)$")
        if not jws then error("not a purchases line: " .. line:sub(1, 80)) end
        count = count + 1
        requests[count] = wrk.format("POST", "/v1/purchases/apple",
          { ["Authorization"] = "Bearer " .. token, ["Content-Type"] = "application/json" },
          '{"signedTransaction":"' .. jws .. '"}')
        fallback = fallback or wrk.format("GET", "/v1/wallet", { ["Authorization"] = "Bearer " .. token })
      end
    end
    index = index + 1
  end
  if count == 0 then error("no purchases in lines " .. from .. "+" .. limit .. " of " .. file) end
end

function request()
  if mode ~= "new" then return requests[math.random(1, count)] end
  if sent < count then
    sent = sent + 1
    return requests[sent]
  end
  -- Out of new transactions: stop this thread. wrk may still write this request before its loop ends; a wallet read
  -- credits and debits nothing.
  exhausted = 1
  wrk.thread:stop()
  return fallback
end

function done(summary, latency, responses)
  local handed, ran_out = 0, 0
  for _, thread in ipairs(all) do
    handed = handed + (thread:get("sent") or 0)
    ran_out = ran_out + (thread:get("exhausted") or 0)
  end
  io.write(string.format("purchases handed out: %d; threads out of transactions: %d\n", handed, ran_out))
end
