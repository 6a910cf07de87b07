-- floodgate-server's Redis script, part 3 of 5 (see check.lua): TTLs and the four
-- algorithms, each the Lua twin of its pure Rust version in src/algorithm/.

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
-- reset_ns (string), new state; charge(state, item, key) -> remaining, reset_ns, new
-- state, for hits that do not fit (mode "charge"); save(key, state, item). `item` carries
-- the limit, hits, now_us; the pure Rust twin of each is in src/algorithm/.

-- Debt is capped at one limit (src/algorithm/mod.rs, `charge`): a window counts at most
-- twice its limit (Limit::max_count; below 2^33 as `mul` and `div` require), a token
-- bucket's TAT is at most two bursts ahead of now.
local function max_count(it) return 2 * it.rpu end

local function with_hits(it, hits)
  local c = {}
  for k, v in pairs(it) do c[k] = v end
  c.hits = hits
  return c
end

-- Fixed window. State: "window count" (window = now_us / period_us). A count past the
-- limit (a charge's debt, at most one limit) carries into the next window.
local fw = {}
local function fw_carried(c, it) return math.min(math.max(c - it.rpu, 0), it.rpu) end
function fw.load(key)
  local v = redis.call('GET', key)
  local w, c = string.match(v or '', '^(%d+) (%d+)$')
  return { w = tonumber(w) or 0, c = tonumber(c) or 0 }
end
function fw.decide(s, it)
  local window = dm(it.now, it.period_us)
  local cur = s
  if s.w + 1 == window then cur = { w = window, c = fw_carried(s.c, it) }
  elseif s.w < window then cur = { w = window, c = 0 } end
  local reset = math.max((cur.w + 1) * it.period_us - it.now, 0) * 1000
  local after = cur.c + it.hits
  if cur.c + math.max(it.hits, 1) <= it.rpu then
    return true, it.rpu - after, fmt(reset), { w = cur.w, c = after }
  end
  -- Denied: one hit fits now if only the cost was too much; else at the window's end,
  -- or at the next one's if a whole limit of debt carries into it.
  if cur.c < it.rpu then reset = 0
  elseif fw_carried(cur.c, it) >= it.rpu then reset = reset + it.period_us * 1000 end
  return false, math.max(it.rpu - cur.c, 0), fmt(reset), cur
end
function fw.charge(s, it)
  local _, _, _, cur = fw.decide(s, it) -- denied: the state as of this window
  local n = { w = cur.w, c = math.min(cur.c + it.hits, max_count(it)) }
  -- Over now: the time until one hit fits is what a one-hit request would be told.
  local _, _, reset = fw.decide(n, with_hits(it, 1))
  return 0, reset, n
end
function fw.save(key, s, it)
  local windows = 1
  if s.c > it.rpu then windows = 2 end -- the debt lasts into the next window
  local left = math.max((s.w + windows) * it.period_us - it.now, 0) * 1000
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
-- Where a request starts from: the TAT, or now if it has passed, and at most two bursts
-- ahead of now (one burst of debt).
local function tb_start(s, now, capacity)
  local start = s.tat
  if cmp(start, now) < 0 then start = now end
  local deepest = add(now, mul(capacity, 2))
  if cmp(start, deepest) > 0 then start = deepest end
  return start, deepest
end
function tb.decide(s, it)
  local token = big(it.unit_s * 1000000000)
  local now = mul(mul(big(it.now), 1000), it.rpu)
  local capacity = mul(token, it.burst)
  local start = tb_start(s, now, capacity)
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
function tb.charge(s, it)
  local token = big(it.unit_s * 1000000000)
  local now = mul(mul(big(it.now), 1000), it.rpu)
  local capacity = mul(token, it.burst)
  local start, deepest = tb_start(s, now, capacity)
  -- Into debt by the whole cost, at most one burst below zero; one hit fits once debt +
  -- one token is within capacity.
  local new_tat = add(start, mul(token, it.hits))
  if cmp(new_tat, deepest) > 0 then new_tat = deepest end
  local ahead = sub(new_tat, now)
  local one_hit = ceil_div(sub(add(ahead, token), capacity), it.rpu)
  return 0, str(one_hit), { tat = new_tat, reset = ceil_div(ahead, it.rpu) }
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
                pend = s.pend + it.hits, pend_at = at, merge = s.merge }
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
      -- A charge earlier in this call merged into the newest: it is restamped.
      if s.merge and lo == s.n - 1 then reset_at = s.pend_at end
    else
      reset_at = s.pend_at -- only this call's own pending hits are enough
    end
  end
  return false, math.max(it.rpu - live, 0), fmt(math.max(reset_at + it.period_us - it.now, 0) * 1000), s
end
-- A charge past the limit joins the newest live entry, restamped now, instead of making
-- an entry of its own (src/algorithm/sliding_log.rs, `charge`): only hits that fit make
-- entries, so a log never holds more members than its limit. With no live entry (or
-- hits already pending in this call, which become one entry), it is pending as usual.
function swl.charge(s, it, key)
  local at = it.now
  if s.pend_at and s.pend_at > at then at = s.pend_at end
  if s.newest and s.newest.at > at then at = s.newest.at end
  local merge = s.merge or (s.pend == 0 and s.oldest ~= nil)
  -- At most one limit of debt: the log holds at most twice its limit live.
  local hits = math.min(it.hits, math.max(max_count(it) - swl_live(s), 0))
  local n = { n = s.n, expired = s.expired, newest = s.newest, oldest = s.oldest,
              pend = s.pend + hits, pend_at = at, merge = merge }
  -- One hit fits once `must_leave` of the oldest live hits have left: among the stored
  -- entries that keep their time (all live ones but a merged newest), the first whose
  -- cumulative count reaches them (binary search by rank); else the pending entry.
  local must_leave = swl_live(n) + 1 - it.rpu
  local last = merge and s.n - 2 or s.n - 1
  local reset_at = at
  if s.oldest and last >= s.expired then
    local base = s.oldest.cum - s.oldest.hits
    local top = last == s.n - 1 and s.newest or entry(redis.call('ZRANGE', key, last, last)[1])
    if top and top.cum - base >= must_leave then
      local lo, hi = s.expired, last
      while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        local e = entry(redis.call('ZRANGE', key, mid, mid)[1])
        if e and e.cum - base >= must_leave then hi = mid else lo = mid + 1 end
      end
      reset_at = entry(redis.call('ZRANGE', key, lo, lo)[1]).at
    end
  end
  return 0, fmt(math.max(reset_at + it.period_us - it.now, 0) * 1000), n
end
function swl.save(key, s, it)
  if s.expired > 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(it.now - it.period_us))
  end
  -- The new entry continues the cumulative count; hits of the same microsecond merge.
  local at, hits, newest = s.pend_at, s.pend, s.newest
  local cum = (newest and newest.cum or 0) + s.pend
  if newest and (newest.at == at or s.merge) then
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
function swc.charge(s, it)
  local _, _, _, cur = swc.decide(s, it) -- denied: the state as of this window
  local n = { w = cur.w, p = cur.p, c = math.min(cur.c + it.hits, max_count(it)) }
  -- Over now: the time until one hit fits is what a one-hit request would be told.
  local _, _, reset = swc.decide(n, with_hits(it, 1))
  return 0, reset, n
end
function swc.save(key, s, it)
  local left = math.max(swc_idle_at_us(s, it) - it.now, 0) * 1000
  redis.call('SET', key, fmt(s.w) .. ' ' .. fmt(s.p) .. ' ' .. fmt(s.c), 'PX', ttl_ms(left))
end

-- Block (requests_per_unit 0): always over, no state; the reset is the end of the unit's
-- window, as the reference reports it. Its key is never read or written, and a charge
-- counts nothing on it.
local blk = {}
function blk.load() return nil end
function blk.decide(_, it)
  local reset = (it.period_us - it.now % it.period_us) * 1000
  return false, 0, fmt(reset), nil
end
function blk.charge(_, it)
  local _, remaining, reset = blk.decide(nil, it)
  return remaining, reset, nil
end
function blk.save() end

local algorithms = { fw = fw, tb = tb, swl = swl, swc = swc, blk = blk }
