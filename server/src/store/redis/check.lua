-- floodgate-server's Redis script: decides one request's counters atomically.
--
-- WHY A SCRIPT: a decision is read -> decide -> write. Done from the server in separate
-- commands, two replicas could both read "one token left" and both take it. Redis runs a
-- script to the end before any other command, so the read, the decision and the write of
-- every counter of a request happen as one step: racing replicas are serialised, and the
-- clock is read once, inside, from Redis (TIME), so replicas' clocks never matter.
--
-- KEYS[i]   the Redis key of item i (see key.rs: fg:v2:{fingerprint}:alg:rpu:unit:burst).
--           On Redis Cluster all KEYS of one call must share a hash slot; the caller groups.
-- ARGV[1]   "commit": decide, then write if the request is admitted (all or nothing).
--           "peek":   decide only, write nothing (the first phase across Cluster slots).
-- ARGV[2]   "" in production: now = Redis TIME. A decimal count of microseconds overrides
--           it (tests compare with the memory store on a fake clock); TTLs then get 60 s of
--           slack, since Redis expires keys on its own clock.
-- ARGV[3]   "" or "not after": a decimal count of microseconds in Redis's clock after which
--           the caller has given up (answered UNAVAILABLE on a timeout). Past it, the script
--           changes nothing and returns {"late"}, so a call queued behind a frozen or
--           overloaded Redis never consumes hits that nobody was told were admitted.
-- ARGV[4 + 6(i-1) ...]  item i: algorithm ("fw" fixed window, "tb" token bucket,
--           "swl" sliding window log, "swc" sliding window counter, "blk" a limit of 0:
--           always over, key untouched), requests_per_unit, unit in seconds, burst ("0"
--           unless tb), hits (0..2^32; larger is the same "never fits"; 0 is check-only:
--           admitted when one hit fits, counts nothing), role ("0" enforced; "1" shadow:
--           never blocks the others; "q" quota: blocks only when no quota item is within
--           its limit).
-- Returns   {"late"} past ARGV[3]. Otherwise 3 values per item, in order: allowed (1/0),
--           remaining (integer), and the ns until reset as a decimal string (it can exceed
--           2^53): admitted, until the limit is fully available; denied, exactly until one
--           hit would be admitted ("0": one fits now), as in src/algorithm/mod.rs; then the
--           instant decided at, in microseconds (Redis's clock, or ARGV[2]).
--
-- All or nothing: every item is decided first against state as it stands (an item on a
-- counter already used earlier in the same call sees that earlier item's hits), nothing
-- is written unless every enforced item is within its limit and, if there are quota
-- items, one of them is (store/mod.rs `admits`); then only admitted items write. Each written key gets a PEXPIRE of exactly how long its state matters.
--
-- Numbers: Lua here has only doubles (exact to 2^53). Times are microseconds (Redis's
-- resolution; ~2^51 today). The token bucket and the sliding counter need products such
-- as burst x period_ns x rpu that reach 2^82, so they use the small exact integer type
-- below (base 10^6 limbs), and agree with the Rust u128 arithmetic to the nanosecond.

local B = 1000000

-- floor(a / d) and a mod d for exact integers a >= 0, d > 0, a + d < 2^53.
local function dm(a, d)
  local q = math.floor(a / d)
  local r = a - q * d
  if r < 0 then q = q - 1; r = r + d elseif r >= d then q = q + 1; r = r - d end
  return q, r
end

local function fmt(n) return string.format('%.0f', n) end

-- Big integers: arrays of base-10^6 limbs, least significant first, no leading zero limb.
local function trim(x)
  local n = #x
  while n > 1 and x[n] == 0 do x[n] = nil; n = n - 1 end
  return x
end

local function big(n) -- n: exact integer, 0 <= n < 2^53
  local x, i = {}, 1
  repeat
    local q, r = dm(n, B)
    x[i] = r; n = q; i = i + 1
  until n == 0
  return x
end

local function parse(s) -- decimal digits, or nil
  if type(s) ~= 'string' or not string.find(s, '^%d+$') then return nil end
  local x, e = {}, #s
  while e >= 1 do
    local b = math.max(1, e - 5)
    x[#x + 1] = tonumber(string.sub(s, b, e))
    e = b - 1
  end
  return trim(x)
end

local function str(x)
  local parts = { fmt(x[#x]) }
  for i = #x - 1, 1, -1 do parts[#parts + 1] = string.format('%06d', x[i]) end
  return table.concat(parts)
end

local function num(x) -- only for values known to be below 2^53
  local n = 0
  for i = #x, 1, -1 do n = n * B + x[i] end
  return n
end

local function cmp(a, b)
  if #a ~= #b then return #a < #b and -1 or 1 end
  for i = #a, 1, -1 do
    if a[i] ~= b[i] then return a[i] < b[i] and -1 or 1 end
  end
  return 0
end

local function add(a, b)
  local x, c = {}, 0
  for i = 1, math.max(#a, #b) do
    local t = (a[i] or 0) + (b[i] or 0) + c
    if t >= B then x[i] = t - B; c = 1 else x[i] = t; c = 0 end
  end
  if c > 0 then x[#x + 1] = c end
  return x
end

local function sub(a, b) -- a - b, saturating at 0
  if cmp(a, b) <= 0 then return { 0 } end
  local x, c = {}, 0
  for i = 1, #a do
    local t = a[i] - (b[i] or 0) - c
    if t < 0 then x[i] = t + B; c = 1 else x[i] = t; c = 0 end
  end
  return trim(x)
end

local function mul(a, m) -- m: exact integer, 0 <= m < 2^33
  if m == 0 then return { 0 } end
  local x, c = {}, 0
  for i = 1, #a do
    local q, r = dm(a[i] * m + c, B)
    x[i] = r; c = q
  end
  while c > 0 do
    local q, r = dm(c, B)
    x[#x + 1] = r; c = q
  end
  return trim(x)
end

local function div(a, d) -- floor(a / d) and a mod d; d: exact integer, 1 <= d < 2^33
  local x, r = {}, 0
  for i = #a, 1, -1 do
    local q
    q, r = dm(r * B + a[i], d)
    x[i] = q
  end
  return trim(x), r
end

local function ceil_div(a, d)
  local q, r = div(a, d)
  if r > 0 then q = add(q, { 1 }) end
  return q
end

-- TTL in ms (a string, as PX and PEXPIRE take it) for state that matters for `ms` more
-- milliseconds. Capped at 2^42 ms (139 years): a bucket that deep in debt is forgotten then.
local slack_ms = 0
local MAX_TTL_MS = 4398046511104
local function px(ms)
  ms = math.max(1, math.min(ms, MAX_TTL_MS))
  return fmt(ms + slack_ms)
end
local function ttl_ms(ns)
  return px(math.ceil(ns / 1000000))
end

-- Each algorithm: load(key, item) -> state; decide(state, item) -> allowed, remaining,
-- reset_ns (string), new state; save(key, state, item). `item` carries the limit, hits,
-- now_us; the pure Rust twin of each is in src/algorithm/.

-- Fixed window. State: "window count" (window = now_us / period_us).
local fw = {}
function fw.load(key)
  local v = redis.call('GET', key)
  local w, c = string.match(v or '', '^(%d+) (%d+)$')
  return { w = tonumber(w) or 0, c = tonumber(c) or 0 }
end
function fw.decide(s, it)
  local window = dm(it.now, it.period_us)
  local cur = s
  if s.w < window then cur = { w = window, c = 0 } end
  local reset = math.max((cur.w + 1) * it.period_us - it.now, 0) * 1000
  local after = cur.c + it.hits
  if cur.c + math.max(it.hits, 1) <= it.rpu then
    return true, it.rpu - after, fmt(reset), { w = cur.w, c = after }
  end
  -- Denied: one hit fits at the window's end, or now if only the cost was too much.
  if cur.c < it.rpu then reset = 0 end
  return false, math.max(it.rpu - cur.c, 0), fmt(reset), cur
end
function fw.save(key, s, it)
  local left = math.max((s.w + 1) * it.period_us - it.now, 0) * 1000
  redis.call('SET', key, fmt(s.w) .. ' ' .. fmt(s.c), 'PX', ttl_ms(left))
end

-- Token bucket (GCRA). State: the theoretical arrival time in units of 1/rpu ns, so one
-- token is exactly period_ns units and nothing is rounded (decimal string).
local tb = {}
function tb.load(key)
  return { tat = parse(redis.call('GET', key)) or { 0 } }
end
local function whole_tokens(units, it)
  return num(div(div(units, 1000000000), it.unit_s))
end
function tb.decide(s, it)
  local token = big(it.unit_s * 1000000000)
  local now = mul(mul(big(it.now), 1000), it.rpu)
  local capacity = mul(token, it.burst)
  local start = s.tat
  if cmp(start, now) < 0 then start = now end
  local debt = sub(start, now)
  -- Denied: one hit fits once debt + one token is within the capacity (ns, rounded up).
  local function one_hit_ns() return str(ceil_div(sub(add(debt, token), capacity), it.rpu)) end
  if it.hits > it.burst then
    return false, whole_tokens(sub(capacity, debt), it), one_hit_ns(), s
  end
  local new_tat = add(start, mul(token, it.hits))
  local ahead = sub(new_tat, now)
  local probe = ahead -- check-only (hits 0): one token must be there
  if it.hits == 0 then probe = add(ahead, token) end
  if cmp(probe, capacity) <= 0 then
    local reset = ceil_div(ahead, it.rpu)
    return true, whole_tokens(sub(capacity, ahead), it), str(reset), { tat = new_tat, reset = reset }
  end
  return false, whole_tokens(sub(capacity, debt), it), one_hit_ns(), s
end
function tb.save(key, s)
  -- Full again (as good as absent) after `reset` ns; in ms, rounded up.
  local ms = ceil_div(s.reset, 1000000)
  redis.call('SET', key, str(s.tat), 'PX', #ms > 3 and px(MAX_TTL_MS) or px(num(ms)))
end

-- Sliding window log. A sorted set, one member per admitted request still in the window
-- (hits in the same microsecond share one): score = time in us, member
-- "time_us:hits:cumulative", where cumulative counts every hit ever logged in this key,
-- so the hits between any two entries are a subtraction (no scan of the log).
local swl = {}
local function entry(m)
  if not m then return nil end
  local at, h, c = string.match(m, '^(%d+):(%d+):(%d+)$')
  if not at then return nil end
  return { at = tonumber(at), hits = tonumber(h), cum = tonumber(c), member = m }
end
function swl.load(key, it)
  local thr = it.now - it.period_us -- entries at or before this have left the window
  local n = redis.call('ZCARD', key)
  local s = { n = n, expired = 0, pend = 0 }
  if n == 0 then return s end
  s.expired = redis.call('ZCOUNT', key, '-inf', fmt(thr))
  s.newest = entry(redis.call('ZRANGE', key, -1, -1)[1])
  if s.expired < n then
    s.oldest = entry(redis.call('ZRANGE', key, s.expired, s.expired)[1])
  end
  return s
end
local function swl_live(s)
  local live = s.pend
  if s.oldest and s.newest then live = live + s.newest.cum - s.oldest.cum + s.oldest.hits end
  return live
end
function swl.decide(s, it, key)
  local live = swl_live(s)
  local after = live + it.hits
  if it.hits == 0 and live < it.rpu then
    -- Check-only: nothing recorded; fully available once the newest live hit leaves.
    local last
    if s.oldest and s.newest then last = s.newest.at end
    if s.pend > 0 and (not last or s.pend_at > last) then last = s.pend_at end
    local reset = last and math.max(last + it.period_us - it.now, 0) * 1000 or 0
    return true, it.rpu - live, fmt(reset), s
  end
  if it.hits > 0 and after <= it.rpu then
    local at = it.now
    if s.pend_at and s.pend_at > at then at = s.pend_at end
    if s.newest and s.newest.at > at then at = s.newest.at end
    local n = { n = s.n, expired = s.expired, newest = s.newest, oldest = s.oldest,
                pend = s.pend + it.hits, pend_at = at }
    return true, it.rpu - after, fmt((at + it.period_us - it.now) * 1000), n
  end
  -- Denied: one hit fits once `must_leave` of the oldest live hits have left: find the
  -- first entry whose cumulative count reaches them (binary search by rank). None: now.
  local must_leave = live + 1 - it.rpu
  local reset_at = it.now - it.period_us
  if must_leave > 0 then
    local base = s.oldest and (s.oldest.cum - s.oldest.hits) or 0
    if s.oldest and s.newest.cum - base >= must_leave then
      local lo, hi = s.expired, s.n - 1
      while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        local e = entry(redis.call('ZRANGE', key, mid, mid)[1])
        if e and e.cum - base >= must_leave then hi = mid else lo = mid + 1 end
      end
      reset_at = entry(redis.call('ZRANGE', key, lo, lo)[1]).at
    else
      reset_at = s.pend_at -- only this call's own pending hits are enough
    end
  end
  return false, math.max(it.rpu - live, 0), fmt(math.max(reset_at + it.period_us - it.now, 0) * 1000), s
end
function swl.save(key, s, it)
  if s.expired > 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(it.now - it.period_us))
  end
  -- The new entry continues the cumulative count; hits of the same microsecond merge.
  local at, hits, newest = s.pend_at, s.pend, s.newest
  local cum = (newest and newest.cum or 0) + s.pend
  if newest and newest.at == at then
    redis.call('ZREM', key, newest.member)
    hits = hits + newest.hits
  end
  redis.call('ZADD', key, fmt(at), fmt(at) .. ':' .. fmt(hits) .. ':' .. fmt(cum))
  redis.call('PEXPIRE', key, ttl_ms((at + it.period_us - it.now) * 1000))
end

-- Sliding window counter. State: "window previous current". Estimates are compared
-- scaled by the period (in us, which is exact as now is whole us), as big integers.
local swc = {}
function swc.load(key)
  local v = redis.call('GET', key)
  local w, p, c = string.match(v or '', '^(%d+) (%d+) (%d+)$')
  return { w = tonumber(w) or 0, p = tonumber(p) or 0, c = tonumber(c) or 0 }
end
local function swc_idle_at_us(s, it) -- 0 when fresh
  if s.c > 0 then return (s.w + 2) * it.period_us end
  if s.p > 0 then return (s.w + 1) * it.period_us end
  return 0
end
function swc.decide(s, it)
  local P = it.period_us
  local window = dm(it.now, P)
  local cur = s
  if s.w + 1 == window then cur = { w = window, p = s.c, c = 0 }
  elseif s.w < window then cur = { w = window, p = 0, c = 0 } end
  local start = cur.w * P
  local elapsed = math.min(math.max(it.now - start, 0), P)
  local estimate = add(mul(big(P - elapsed), cur.p), mul(big(P), cur.c))
  local budget = mul(big(P), it.rpu)
  local function remaining(used) return num(div(div(sub(budget, used), 1000000), it.unit_s)) end
  local used = add(estimate, mul(big(P), it.hits))
  if cmp(add(estimate, mul(big(P), math.max(it.hits, 1))), budget) <= 0 then
    local n = { w = cur.w, p = cur.p, c = cur.c + it.hits }
    return true, remaining(used), fmt(math.max(swc_idle_at_us(n, it) - it.now, 0) * 1000), n
  end
  local P_ns = it.unit_s * 1000000000
  local rel = 0 -- ns from now until one hit fits: 0 if it does now
  if cmp(add(estimate, big(P)), budget) > 0 then
    -- First e with weighted x (P - e) <= room x P: e = P - floor(room x P / weighted).
    local room, by, ends
    if cur.c < it.rpu then
      room, by, ends = it.rpu - cur.c - 1, cur.p, P_ns
    else
      room, by, ends = it.rpu - 1, cur.c, 2 * P_ns
    end
    local shrink = div(mul(big(P_ns), room), math.max(by, 1))
    local sh = P_ns
    if cmp(shrink, big(P_ns)) < 0 then sh = num(shrink) end
    rel = (start - it.now) * 1000 + ends - sh
  end
  return false, remaining(estimate), fmt(math.max(rel, 0)), cur
end
function swc.save(key, s, it)
  local left = math.max(swc_idle_at_us(s, it) - it.now, 0) * 1000
  redis.call('SET', key, fmt(s.w) .. ' ' .. fmt(s.p) .. ' ' .. fmt(s.c), 'PX', ttl_ms(left))
end

-- Block (requests_per_unit 0): always over, no state; the reset is the end of the unit's
-- window, as the reference reports it. Its key is never read or written.
local blk = {}
function blk.load() return nil end
function blk.decide(_, it)
  local reset = (it.period_us - it.now % it.period_us) * 1000
  return false, 0, fmt(reset), nil
end
function blk.save() end

local algorithms = { fw = fw, tb = tb, swl = swl, swc = swc, blk = blk }

-- The driver.
local now
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[2])
  slack_ms = 60000
end
if ARGV[3] ~= '' and now > tonumber(ARGV[3]) then return { 'late' } end

local states, order, out, blocked = {}, {}, {}, false
local quota_items, quota_within = 0, 0
for i, key in ipairs(KEYS) do
  local a = 4 + (i - 1) * 6
  local unit_s = tonumber(ARGV[a + 2])
  local it = {
    alg = algorithms[ARGV[a]], rpu = tonumber(ARGV[a + 1]), unit_s = unit_s,
    period_us = unit_s * 1000000, burst = tonumber(ARGV[a + 3]),
    hits = tonumber(ARGV[a + 4]), shadow = ARGV[a + 5] == '1', quota = ARGV[a + 5] == 'q',
    now = now,
  }
  if not it.alg then return redis.error_reply('floodgate: unknown algorithm ' .. tostring(ARGV[a])) end
  local st = states[key]
  if it.alg == blk then
    st = {} -- no state: never shared with a counting item on the same key
  elseif not st then
    st = { state = it.alg.load(key, it), item = it }
    states[key] = st
  end
  local allowed, remaining, reset, next_state = it.alg.decide(st.state, it, key)
  if allowed then
    st.state = next_state
    -- A check-only item (hits 0) writes nothing of its own.
    if it.hits > 0 and not st.dirty then st.dirty = true; order[#order + 1] = key end
  elseif not it.shadow and not it.quota then
    blocked = true
  end
  if it.quota then
    quota_items = quota_items + 1
    if allowed then quota_within = quota_within + 1 end
  end
  out[#out + 1] = allowed and 1 or 0
  out[#out + 1] = remaining
  out[#out + 1] = reset
end
-- Quota mode: the quota items block together, when none of them is within.
if quota_items > 0 and quota_within == 0 then blocked = true end
-- Redis's time, from which the server estimates the offset between the clocks.
out[#out + 1] = now

if ARGV[1] == 'commit' and not blocked then
  for _, key in ipairs(order) do
    local st = states[key]
    st.item.alg.save(key, st.state, st.item)
  end
end
return out
