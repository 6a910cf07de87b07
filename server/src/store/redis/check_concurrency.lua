-- floodgate-server's Redis script, part 4 of 5 (see check.lua): concurrency, the Lua twin
-- of src/algorithm/concurrency.rs.
--
-- A sorted set per counter, one member per hold: "slots:id", scored by the hold's
-- deadline in microseconds of Redis's clock (now + one window when taken). A member whose
-- score is at or before now has expired: it counts for nothing and the next write of the
-- key drops it (ZREMRANGEBYSCORE). A counter keeps at most its limit of live holds (each
-- takes a slot or more), so a load reads at most that many plus those expired since the
-- last write. The call's hold is it.hold_op ("a" acquire, "r" release, "" none: check-only)
-- and it.hold_id, from ARGV[4].
local cc = {}
function cc.load(key, it)
  local raw = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local s = { holds = {}, add = {}, remove = {} }
  for j = 1, #raw, 2 do
    local slots, id = string.match(raw[j], '^(%d+):(.+)$')
    local at = tonumber(raw[j + 1])
    if slots and at and at > it.now then
      s.holds[id] = { slots = tonumber(slots), at = at, member = raw[j] }
    end
  end
  return s
end
-- Slots held, the earliest and the latest deadline (0 when none).
local function cc_sum(s)
  local held, earliest, latest = 0, nil, 0
  for _, h in pairs(s.holds) do
    held = held + h.slots
    if not earliest or h.at < earliest then earliest = h.at end
    if h.at > latest then latest = h.at end
  end
  return held, earliest, latest
end
local function cc_copy(s)
  local n = { holds = {}, add = {}, remove = {} }
  for k, v in pairs(s.holds) do n.holds[k] = v end
  for k, v in pairs(s.add) do n.add[k] = v end
  for k, v in pairs(s.remove) do n.remove[k] = v end
  return n
end
function cc.decide(s, it)
  local held, earliest, latest = cc_sum(s)
  local op, id, hits = it.hold_op, it.hold_id, it.hits
  if op == '' then hits = 0 end -- no hold: check-only, nothing taken
  local function admitted(h, last)
    return true, it.rpu - h, fmt(math.max(last - it.now, 0) * 1000)
  end
  if op == 'r' then
    -- Release: frees the id's live hold if any; idempotent.
    local n = cc_copy(s)
    local mine = s.holds[id]
    if mine then
      n.holds[id] = nil; n.add[id] = nil; n.remove[mine.member] = true
    end
    local h, _, last = cc_sum(n)
    local a, r, reset = admitted(h, last)
    return a, r, reset, n
  end
  if op == 'a' and s.holds[id] then
    -- The same id again: the same hold, nothing more taken, its deadline unchanged.
    local a, r, reset = admitted(held, latest)
    return a, r, reset, s
  end
  if hits == 0 and held < it.rpu then
    local a, r, reset = admitted(held, latest)
    return a, r, reset, s
  end
  if op == 'a' and hits > 0 and held + hits <= it.rpu then
    local n = cc_copy(s)
    local at = it.now + it.period_us
    local h = { slots = hits, at = at, member = fmt(hits) .. ':' .. id }
    n.holds[id] = h; n.add[id] = h
    local a, r, reset = admitted(held + hits, math.max(latest, at))
    return a, r, reset, n
  end
  -- Over: a slot frees by itself at the earliest deadline at the latest; now when one is
  -- free and only this request's slots were too many.
  local reset = 0
  if held >= it.rpu and earliest then reset = (earliest - it.now) * 1000 end
  return false, math.max(it.rpu - held, 0), fmt(reset), s
end
-- A charge counts nothing on a concurrency limit: as check-only.
function cc.charge(s, it)
  local _, remaining, reset = cc.decide(s, with_hits(it, 0))
  return remaining, reset, s
end
function cc.save(key, s, it)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(it.now)) -- reclaim expired holds
  for member in pairs(s.remove) do redis.call('ZREM', key, member) end
  for _, h in pairs(s.add) do redis.call('ZADD', key, fmt(h.at), h.member) end
  local _, _, latest = cc_sum(s)
  if latest > it.now then
    -- The key lasts as long as its latest hold (ms, rounded up).
    redis.call('PEXPIRE', key, px(math.ceil((latest - it.now) / 1000)))
  else
    redis.call('DEL', key)
  end
end
algorithms.cc = cc
