"""The Redis side of a shared quota: the key layout and the Lua scripts that run on it.

Keys, for one token (``P`` = ``SharedQuota.prefix``, ``H`` = the first 16 hex digits of the
token's SHA-256, never the token; the braces keep one token's keys in one cluster slot)
and one pool (``POOL`` = ``default`` or ``expensive``)::

    P:{H}:POOL:log       sorted set: one member (a ticket) per start, scored by its time (µs)
    P:{H}:POOL:ok        sorted set: the tickets answered without a 429, by start time
    P:{H}:POOL:limited   sorted set: the tickets that got a 429, by start time
    P:{H}:POOL:pause     the time (µs) the pool is paused until, after a proven 429
    P:{H}:POOL:rule      hash: what the rate rule learned (``RuleState``) and a version
    P:{H}:POOL:stepper   the client stepping the rate up (a lease: one at a time)
    P:{H}:POOL:line      sorted set: client id -> its rank, for each client with calls
                         waiting (interactive first, then by turn: round-robin)
    P:{H}:POOL:line:exp  sorted set: the same members -> when they expire (µs)
    P:{H}:POOL:line:info hash: "<client>:t" -> its turn number
    P:{H}:epoch          a random id made when the state is created: a change means the
                         state was lost (Redis restarted without persistence, flushed)
    P:{H}:clients        sorted set: client id -> last time seen (sizes the fallback)

Times are Redis's own clock (``TIME``) unless the client passes its own (a test's virtual
clock, which every client sharing that Redis must then share).
"""

from __future__ import annotations

__all__ = ["ACQUIRE", "OUTCOMES", "PAUSE", "POOL_KEYS", "WRITE_RULE"]

# The per-pool keys, in the order the scripts take them.
POOL_KEYS = ("log", "ok", "limited", "pause", "rule", "stepper", "line", "line:exp", "line:info")

_NOW = """
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
"""

# KEYS: the pool's keys (POOL_KEYS), then epoch, clients.
# ARGV: 1 now (µs; '': Redis's TIME), 2 limit, 3 window (µs), 4 margin (µs, until the rule
#       learns one), 5 ticket, 6 known epoch ('' on first contact), 7 new epoch id,
#       8 client id, 9 clients horizon (µs), 10 unused, 11 the priority's rank offset (0
#       interactive, more for bulk: every interactive call ranks first), 12 the first round
#       (the most starts before any is answered: one client's max_concurrency), 13 how long
#       it holds at most (µs), 14 grace (µs a waiting client outlives its next ask), 15 poll
#       (µs a call ranked behind others waits; a call held by the check waits 5 polls at
#       most), 16 how many calls this client has waiting (this one included: with more,
#       it stays in the line after its turn),
#       17... the ages (µs) of starts to add (a rejoin after Redis came back).
# The line: a client's rank is its priority's offset plus its turn number, the pool's turn
# counter when it last had a turn (or joined): turns go round-robin over clients. A call
# is admitted only if the free starts outnumber the clients ranked ahead (one each).
# Returns {wait µs (0: admitted; -1: a step up is due and this client holds the lease),
#          epoch, clients seen, rate, allowed, margin µs, version, now µs}.
ACQUIRE = (
    _NOW
    + """
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local rule = redis.call('HMGET', KEYS[5], 'rate', 'allowed', 'margin', 'step_up_at',
  'version', 'answered', 'suspect_until', 'check', 'turns')
local rate = tonumber(rule[1]) or limit
local allowed = tonumber(rule[2]) or limit
local margin = tonumber(rule[3]) or tonumber(ARGV[4])
local step_up_at = tonumber(rule[4]) or -1
local version = tonumber(rule[5]) or 0
local span = window + margin
local keep = math.ceil(2 * span / 1000) + 1000
local epoch = redis.call('GET', KEYS[10])
local lost = false
if not epoch then
  epoch = ARGV[7]
  redis.call('SET', KEYS[10], epoch)
  lost = ARGV[6] ~= ''
elseif ARGV[6] ~= '' and ARGV[6] ~= epoch then
  lost = true
end
if lost then
  if tonumber(redis.call('GET', KEYS[4]) or '0') < now + span then
    redis.call('SET', KEYS[4], now + span, 'PX', math.ceil(span / 1000) + 1000)
  end
end
redis.call('ZADD', KEYS[11], now, ARGV[8])
redis.call('ZREMRANGEBYSCORE', KEYS[11], '-inf', now - tonumber(ARGV[9]))
redis.call('PEXPIRE', KEYS[11], math.ceil(tonumber(ARGV[9]) / 1000))
local clients = redis.call('ZCARD', KEYS[11])
for i = 1, 3 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now - 2 * span)
end
for i = 17, #ARGV do
  local at = now - tonumber(ARGV[i])
  if at > now - span then
    redis.call('ZADD', KEYS[1], at, ARGV[5] .. ':b' .. i)
  end
end
-- The line: clients whose calls wait, by rank; those that went away dropped.
local me = ARGV[8]
local gone = redis.call('ZRANGEBYSCORE', KEYS[8], '-inf', now)
for _, m in ipairs(gone) do
  redis.call('ZREM', KEYS[7], m)
  redis.call('ZREM', KEYS[8], m)
  redis.call('HDEL', KEYS[9], m .. ':t')
end
local turns = tonumber(rule[9]) or 0
local turn = tonumber(redis.call('HGET', KEYS[9], me .. ':t') or turns)
local rank = tonumber(ARGV[11]) + turn
redis.call('HSET', KEYS[9], me .. ':t', turn)
redis.call('ZADD', KEYS[7], rank, me)
for i = 7, 9 do redis.call('PEXPIRE', KEYS[i], keep) end
local function answer(wait)
  -- A waiting client stays in the line until its next ask, and a grace after.
  redis.call('ZADD', KEYS[8], now + math.max(wait, 0) + tonumber(ARGV[14]), me)
  return {wait, epoch, clients, rate, allowed, margin, version, now}
end
local pause = tonumber(redis.call('GET', KEYS[4]) or '0')
if pause > now then
  return answer(pause - now)
end
-- When the log allows the next start (StartLog.allows, over the shared log).
local at = -1
local count = redis.call('ZCARD', KEYS[1])
if count >= limit then
  local entry = redis.call('ZRANGE', KEYS[1], count - limit, count - limit, 'WITHSCORES')
  at = tonumber(entry[2]) + span
end
if rate < limit then
  local taken = 0
  local starts = redis.call('ZREVRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  for i = 1, #starts, 2 do
    if not redis.call('ZSCORE', KEYS[3], starts[i]) then
      local t = tonumber(starts[i + 1])
      if taken == 0 then at = math.max(at, t + span / rate) end
      taken = taken + 1
      if taken >= rate then
        at = math.max(at, t + span)
        break
      end
    end
  end
  if step_up_at >= 0 and step_up_at <= now and now < at then
    if redis.call('SET', KEYS[6], ARGV[8], 'NX', 'PX', math.ceil(span / 1000)) then
      return answer(-1)
    end
  end
  if step_up_at >= 0 and step_up_at > now then at = math.min(at, step_up_at) end
end
if at > now then
  return answer(math.max(at - now, 1))
end
-- The first round, shared: no more go out than one client would send until those are
-- answered (told a rate above the server's, the rest would only collect 429s), for
-- ARGV[13] µs at most (a slow request must not hold every client).
local first_round = tonumber(ARGV[12])
if (tonumber(rule[6]) or 0) < first_round and count >= first_round then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if oldest[2] and now < tonumber(oldest[2]) + tonumber(ARGV[13]) then
    return answer(tonumber(ARGV[15]))
  end
end
-- A 429 is suspect: one start goes alone, as the check, until it is answered.
local check = false
if (tonumber(rule[7]) or 0) > now then
  if rule[8] and rule[8] ~= '' then
    return answer(math.min(tonumber(rule[7]) - now, 5 * tonumber(ARGV[15])))
  end
  check = true
end
-- Free: unless the calls ranked ahead of ours, in other clients, need every free start.
local free = 1
if rate >= limit then free = limit - redis.call('ZCOUNT', KEYS[1], '(' .. (now - span), '+inf') end
local ahead = 0
-- (Formatted in full: Lua writes a large number with 14 digits, which would round it.)
local below = '(' .. string.format('%.0f', rank)
for _, m in ipairs(redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', below)) do
  -- One start each is held for them, not one per call waiting: holding back a burst for
  -- every call waiting elsewhere would spread each window's burst over many polls.
  if m ~= me then ahead = ahead + 1 end
end
if ahead > 0 and ahead >= free then
  return answer(tonumber(ARGV[15]))
end
redis.call('ZADD', KEYS[1], now, ARGV[5])
redis.call('PEXPIRE', KEYS[1], keep)
if check then redis.call('HSET', KEYS[5], 'check', ARGV[5]) end
-- This client had its turn: behind every client waiting now, if it has more waiting.
turns = redis.call('HINCRBY', KEYS[5], 'turns', 1)
local waiting = tonumber(ARGV[16]) - 1
if waiting > 0 then
  redis.call('HSET', KEYS[9], me .. ':t', turns)
  redis.call('ZADD', KEYS[7], tonumber(ARGV[11]) + turns, me)
  return answer(0)
end
redis.call('ZREM', KEYS[7], me)
redis.call('ZREM', KEYS[8], me)
redis.call('HDEL', KEYS[9], me .. ':t')
return {0, epoch, clients, rate, allowed, margin, version, now}
"""
)

# KEYS: log, ok, limited, rule. ARGV: now (µs; '': Redis's TIME), then triples (kind,
# ticket, wait µs), kind 'ok', '429' or 'forget'. Records what became of starts (the rule
# counts what the server took from these), counts the answers (the shared first round),
# and keeps the shared suspect: a 429 while none stands makes one (until its window end;
# one check at a time meanwhile), a success sent no earlier, or the check's, clears it.
OUTCOMES = (
    _NOW
    + """
local answered = 0
local suspect = redis.call('HMGET', KEYS[4], 'suspect_until', 'suspect_at', 'check')
local till = tonumber(suspect[1]) or 0
local since = tonumber(suspect[2]) or 0
for i = 2, #ARGV, 3 do
  local kind, ticket = ARGV[i], ARGV[i + 1]
  if kind == 'forget' then
    redis.call('ZREM', KEYS[1], ticket)
    if suspect[3] == ticket then redis.call('HSET', KEYS[4], 'check', '') end
  else
    answered = answered + 1
    local at = redis.call('ZSCORE', KEYS[1], ticket)
    if at then
      at = tonumber(at)
      redis.call('ZADD', kind == 'ok' and KEYS[2] or KEYS[3], at, ticket)
      if kind == '429' and till <= now then
        till, since = now + tonumber(ARGV[i + 2]), at
        redis.call('HSET', KEYS[4], 'suspect_until', till, 'suspect_at', at, 'check', '')
      elseif kind == 'ok' and till > now and (suspect[3] == ticket or at >= since) then
        till = 0
        redis.call('HSET', KEYS[4], 'suspect_until', 0, 'check', '')
      elseif kind == '429' and suspect[3] == ticket then
        redis.call('HSET', KEYS[4], 'check', '')
      end
    end
  end
end
redis.call('HINCRBY', KEYS[4], 'answered', answered)
for i = 2, 3 do
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[i], ttl) end
end
return 1
"""
)

# KEYS: pause. ARGV: now (µs; '': Redis's TIME), µs to pause. Extends the pause to
# now + ARGV[2], never shortens it; the key expires (in Redis's time) a second after.
PAUSE = (
    _NOW
    + """
local till = now + tonumber(ARGV[2])
if tonumber(redis.call('GET', KEYS[1]) or '0') < till then
  redis.call('SET', KEYS[1], till, 'PX', math.ceil(tonumber(ARGV[2]) / 1000) + 1000)
end
return 1
"""
)

# KEYS: rule, stepper. ARGV: the version read, client id, then field/value pairs.
# Writes the rule's state if nobody wrote since it was read (returns 1; else 0), and ends
# this client's step-up lease.
WRITE_RULE = """
if redis.call('GET', KEYS[2]) == ARGV[2] then redis.call('DEL', KEYS[2]) end
local version = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if version ~= tonumber(ARGV[1]) then return 0 end
for i = 3, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'version', version + 1)
redis.call('PEXPIRE', KEYS[1], 86400000)
return 1
"""
