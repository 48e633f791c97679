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
    P:{H}:POOL:line:info hash: "<client>:t" -> its turn number, "<client>:w" -> how many
                         calls it had waiting when it last asked
    P:{H}:epoch          a random id made when the state is created: a change means the
                         state was lost (Redis restarted without persistence, flushed)
    P:{H}:clients        sorted set: client id -> last time seen (sizes the fallback)

Times are Redis's own clock (``TIME``) unless the client passes its own (a test's virtual
clock, which every client sharing that Redis must then share).
"""

from __future__ import annotations

import math
from typing import Any

from magisterium_async._ratelimit._rule import RuleState

__all__ = [
    "ACQUIRE",
    "OUTCOMES",
    "PAUSE",
    "POOL_KEYS",
    "WRITE_RULE",
    "rule_fields",
    "rule_state",
    "text",
]

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
# ARGV: 1 now (µs; '': Redis's TIME), 2 limit, 3 window (µs), 4 margin (µs), 5 ticket,
#       6 known epoch ('' on first contact), 7 new epoch id,
#       8 client id, 9 clients horizon (µs), 10 the bulk rank offset (a rank at or above it
#       is bulk), 11 the priority's rank offset (0 interactive, ARGV 10 for bulk: every
#       interactive call ranks first), 12 the first round
#       (the most starts before any is answered: one client's max_concurrency), 13 how long
#       it holds at most (µs), 14 grace (µs a waiting client outlives its next ask), 15 poll
#       (µs a call ranked behind others waits; a call held by the check waits 5 polls at
#       most), 16 how many calls this client has waiting (this one included: with more,
#       it stays in the line after its turn), 17 whether this client's line contends ('1':
#       its head is interactive, or it holds calls with a fairness key), 18 how long (µs)
#       bulk starts stay paced after the last ask that contended, 19 how many quota
#       intervals apart paced starts are, 20 how long (µs) a run of starts (less than two
#       spans apart) lasts before its bulk starts are paced while it runs (a harvest),
#       21... the ages (µs) of starts to add (a rejoin after Redis came back).
# The line: a client's rank is its priority's offset plus its turn number, the pool's turn
# counter when it last had a turn (or joined): turns go round-robin over clients. A call
# is admitted only if the free starts outnumber those held for other clients: one for
# each interactive client ahead of a bulk one, and among the clients of one priority,
# the rest of each one's round-robin share of the span's starts (see below). Pacing (as
# RateRule.paced_start): while an ask that contended came within ARGV 18, or, at the
# full rate, the log's run of starts has lasted ARGV 20 (the rule hash's 'run': when it
# began), a bulk start
# waits until ARGV 19 quota intervals after the log's last start, and until it leaves a
# start free within one interval, so whoever contends finds a start within about one
# interval whatever bulk work waits in any process.
# Returns {wait µs (0: admitted; -1: a step up is due and this client holds the lease),
#          epoch, clients seen, rate, allowed, now µs}.
ACQUIRE = (
    _NOW
    + """
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local rule = redis.call('HMGET', KEYS[5], 'rate', 'allowed', 'step_up_at',
  'answered', 'suspect_until', 'check', 'turns', 'contended', 'run')
local rate = tonumber(rule[1]) or limit
local allowed = tonumber(rule[2]) or limit
local margin = tonumber(ARGV[4])
local step_up_at = tonumber(rule[3]) or -1
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
for i = 21, #ARGV do
  local at = now - tonumber(ARGV[i])
  if at > now - span then
    redis.call('ZADD', KEYS[1], at, ARGV[5] .. ':b' .. i)
  end
end
-- A call a burst would hold back asks: bulk starts are paced for ARGV[18] µs from now;
-- and while a run of starts that lasted ARGV[20] µs goes on (a harvest).
local contended = tonumber(rule[8]) or -math.huge
if ARGV[17] == '1' then
  contended = now
  redis.call('HSET', KEYS[5], 'contended', now)
end
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local run = tonumber(rule[9]) or now
if not newest[2] or tonumber(newest[2]) < now - 2 * span then
  run = now  -- the next start begins a run
end
local paced = now < contended + tonumber(ARGV[18])
  or (rate >= limit and now - run >= tonumber(ARGV[20]))
-- The line: clients whose calls wait, by rank; those that went away dropped.
local me = ARGV[8]
local gone = redis.call('ZRANGEBYSCORE', KEYS[8], '-inf', now)
for _, m in ipairs(gone) do
  redis.call('ZREM', KEYS[7], m)
  redis.call('ZREM', KEYS[8], m)
  redis.call('HDEL', KEYS[9], m .. ':t', m .. ':w')
end
local turns = tonumber(rule[7]) or 0
local BULK = tonumber(ARGV[10])
local turn = tonumber(redis.call('HGET', KEYS[9], me .. ':t') or turns)
local rank = tonumber(ARGV[11]) + turn
redis.call('HSET', KEYS[9], me .. ':t', turn, me .. ':w', ARGV[16])
redis.call('ZADD', KEYS[7], rank, me)
for i = 7, 9 do redis.call('PEXPIRE', KEYS[i], keep) end
local function answer(wait)
  -- A waiting client stays in the line until its next ask, and a grace after.
  redis.call('ZADD', KEYS[8], now + math.max(wait, 0) + tonumber(ARGV[14]), me)
  return {wait, epoch, clients, rate, allowed, now}
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
-- Pacing: a bulk start one paced gap after the log's last start, while contended, and
-- not before it leaves a start free within an interval (keeps_a_start_free: it and the
-- rate - 1 newest starts span rate - 1 intervals).
if tonumber(ARGV[11]) >= BULK and paced then
  local interval = window / rate
  local paced = -1
  if newest[2] then paced = tonumber(newest[2]) + tonumber(ARGV[19]) * interval end
  if rate >= 2 and count >= rate - 1 then
    local k = count - (rate - 1)
    local entry = redis.call('ZRANGE', KEYS[1], k, k, 'WITHSCORES')
    paced = math.max(paced, tonumber(entry[2]) + (rate - 1) * interval)
  end
  if paced > now then
    return answer(math.max(paced - now, 1))
  end
end
-- The first round, shared: no more go out than one client would send until those are
-- answered (told a rate above the server's, the rest would only collect 429s), for
-- ARGV[13] µs at most (a slow request must not hold every client).
local first_round = tonumber(ARGV[12])
if (tonumber(rule[4]) or 0) < first_round and count >= first_round then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if oldest[2] and now < tonumber(oldest[2]) + tonumber(ARGV[13]) then
    return answer(tonumber(ARGV[15]))
  end
end
-- A 429 is suspect: one start goes alone, as the check, until it is answered.
local check = false
if (tonumber(rule[5]) or 0) > now then
  if rule[6] and rule[6] ~= '' then
    return answer(math.min(tonumber(rule[5]) - now, 5 * tonumber(ARGV[15])))
  end
  check = true
end
-- Free: unless the calls of other clients need the free starts.
local free = 1
if rate >= limit then free = limit - redis.call('ZCOUNT', KEYS[1], '(' .. (now - span), '+inf') end
local held = 0
local offset = tonumber(ARGV[11])
local peers = {}
local line = redis.call('ZRANGE', KEYS[7], 0, -1, 'WITHSCORES')
for i = 1, #line, 2 do
  local m, r = line[i], tonumber(line[i + 1])
  if m ~= me then
    if (r >= BULK) == (offset >= BULK) then
      peers[#peers + 1] = {id = m, rank = r}
    elseif r < rank then
      held = held + 1  -- an interactive client ahead of a bulk one: one start each
    end
  end
end
if #peers > 0 and rate < limit then
  -- Lowered, starts are spaced: one each for the clients of this priority ranked ahead.
  for _, p in ipairs(peers) do
    if p.rank < rank then held = held + 1 end
  end
elseif #peers > 0 then
  -- Round-robin over clients, per call waiting: this span's starts are shared out among
  -- the clients of this priority as turns in rotation would (each up to the calls it
  -- has waiting, the rest evenly), and each other client's share not yet used is held
  -- for it until it asks. Per call waiting, not one start per client ranked ahead: a
  -- client that asks less often than another still gets its turns in the window.
  local used = {}
  for _, t in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. (now - span), '+inf')) do
    local c = string.match(t, '^[^:]+')
    used[c] = (used[c] or 0) + 1
  end
  local all = {{id = me, rank = rank, waiting = tonumber(ARGV[16])}}
  for _, p in ipairs(peers) do
    p.waiting = tonumber(redis.call('HGET', KEYS[9], p.id .. ':w') or '1')
    all[#all + 1] = p
  end
  -- Water-filling from what each used: the free starts go one at a time to the client
  -- with the fewest of this span's starts that wants more. Ties go to this client first
  -- (what does not divide evenly goes to whoever asks now, not held for a client that
  -- may ask only at its next poll), then to those ranked ahead.
  for _, c in ipairs(all) do
    c.used = used[c.id] or 0
    c.share = c.used
    c.wants = c.used + c.waiting
  end
  for _ = 1, free do
    local best = nil
    for _, c in ipairs(all) do
      if c.share < c.wants and (best == nil or c.share < best.share
          or (c.share == best.share and best.id ~= me and (c.id == me or c.rank < best.rank)))
      then
        best = c
      end
    end
    if best == nil then break end
    best.share = best.share + 1
  end
  for _, c in ipairs(all) do
    if c.id ~= me and c.share > c.used then held = held + c.share - c.used end
  end
end
if held > 0 and held >= free then
  return answer(tonumber(ARGV[15]))
end
redis.call('ZADD', KEYS[1], now, ARGV[5])
redis.call('PEXPIRE', KEYS[1], keep)
redis.call('HSET', KEYS[5], 'run', run)
if check then redis.call('HSET', KEYS[5], 'check', ARGV[5]) end
-- This client had its turn: behind every client waiting now, if it has more waiting.
turns = redis.call('HINCRBY', KEYS[5], 'turns', 1)
local waiting = tonumber(ARGV[16]) - 1
if waiting > 0 then
  redis.call('HSET', KEYS[9], me .. ':t', turns, me .. ':w', waiting)
  redis.call('ZADD', KEYS[7], tonumber(ARGV[11]) + turns, me)
  return answer(0)
end
redis.call('ZREM', KEYS[7], me)
redis.call('ZREM', KEYS[8], me)
redis.call('HDEL', KEYS[9], me .. ':t', me .. ':w')
return {0, epoch, clients, rate, allowed, now}
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


# The rule's state in Redis: numbers as text; times in seconds of Redis's clock, but the
# one the admission script reads (step_up_at) in µs; -1 for "none".
def rule_fields(state: RuleState) -> dict[str, Any]:
    return {
        "rate": state.rate,
        "allowed": state.allowed,
        # Rounded up: the script must not find a step up due before the rule said.
        "step_up_at": -1 if math.isinf(state.step_up_at) else math.ceil(state.step_up_at * 1e6),
        "refused_tries": state.refused_tries,
        "phase": "" if state.phase is None else repr(state.phase),
        "rtt": repr(state.rtt),
        "before": state.before,
    }


def rule_state(fields: dict[str, str], limit: int) -> RuleState:
    if "rate" not in fields:
        return RuleState(rate=limit, allowed=limit)
    step_up_at = float(fields["step_up_at"])
    return RuleState(
        rate=int(float(fields["rate"])),
        allowed=int(float(fields["allowed"])),
        step_up_at=math.inf if step_up_at < 0 else step_up_at / 1e6,
        refused_tries=int(fields.get("refused_tries", "0")),
        phase=float(fields["phase"]) if fields.get("phase") else None,
        rtt=float(fields.get("rtt", "0")),
        before=int(fields.get("before", "0")),
    )


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
