-- floodgate-server's Redis script, part 5 of 5 (see check.lua): the call itself: read
-- the clock, decide every item, grant, write if admitted, answer.

-- The driver.
local now
if ARGV[2] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[2])
  slack_ms = 60000
end
local charging = ARGV[1] == 'charge'
-- The call's hold: "a:<id>" acquire, "r:<id>" release, "" none.
local hold_op, hold_id = string.match(ARGV[4], '^([ar]):(.+)$')
hold_op = hold_op or ''
if ARGV[3] ~= '' and now > tonumber(ARGV[3]) then return { 'late' } end

local states, order, out, blocked, items = {}, {}, {}, false, {}
local quota_items, quota_within = 0, 0
for i, key in ipairs(KEYS) do
  local a = 5 + (i - 1) * 7
  local unit_s = tonumber(ARGV[a + 2])
  local it = {
    alg = algorithms[ARGV[a]], rpu = tonumber(ARGV[a + 1]), unit_s = unit_s,
    period_us = unit_s * 1000000, burst = tonumber(ARGV[a + 3]),
    hits = tonumber(ARGV[a + 4]), shadow = ARGV[a + 5] == '1', quota = ARGV[a + 5] == 'q',
    now = now, lease = tonumber(ARGV[a + 6]) or 0, hold_op = hold_op, hold_id = hold_id,
  }
  if not it.alg then return redis.error_reply('floodgate: unknown algorithm ' .. tostring(ARGV[a])) end
  local st = states[key]
  if it.alg == algorithms.blk then
    -- No state: never shared with a counting item on the same key, never written.
    st = { uses = 0, stateless = true }
  elseif not st then
    st = { state = it.alg.load(key, it), item = it, uses = 0 }
    states[key] = st
  end
  st.uses = st.uses + 1
  items[i] = { it = it, st = st, before = st.state }
  local allowed, remaining, reset, next_state = it.alg.decide(st.state, it, key)
  items[i].allowed, items[i].remaining = allowed, remaining
  if not allowed and charging and it.hits > 0 then
    remaining, reset, next_state = it.alg.charge(st.state, it, key)
  end
  if allowed or charging then
    st.state = next_state
    -- A check-only item (hits 0) writes nothing of its own; a release writes what it frees.
    local writes = it.hits > 0 or (it.alg == algorithms.cc and hold_op == 'r')
    if writes and not st.dirty and not st.stateless then
      st.dirty = true; order[#order + 1] = key
    end
  elseif not it.shadow and not it.quota then
    blocked = true
  end
  if it.quota and not it.shadow then
    quota_items = quota_items + 1
    if allowed then quota_within = quota_within + 1 end
  end
  out[#out + 1] = allowed and 1 or 0
  out[#out + 1] = remaining
  out[#out + 1] = reset
  out[#out + 1] = 0
end
-- Quota mode: the quota items block together, when none of them is within (store/mod.rs
-- `admits`). A charge blocks nothing, so this never refuses one.
if quota_items > 0 and quota_within == 0 then blocked = true end
if (ARGV[1] == 'commit' or ARGV[1] == 'count') and not blocked then
  for i, key in ipairs(KEYS) do
    local x = items[i]
    local it = x.it
    if x.allowed and not it.shadow and not it.quota and it.lease > 0 and x.st.uses == 1 then
      local g = math.min(it.lease, x.remaining)
      if g > 0 then
        it.hits = it.hits + g
        local allowed, remaining, reset, next_state = it.alg.decide(x.before, it, key)
        if allowed then -- always: `remaining` hits fit by construction
          x.st.state = next_state
          if not x.st.dirty then x.st.dirty = true; order[#order + 1] = key end
          out[4 * i - 2] = remaining
          out[4 * i - 1] = reset
          out[4 * i] = g
        end
      end
    end
  end
end
-- Redis's time, from which the server estimates the offset between the clocks.
out[#out + 1] = now

if (ARGV[1] == 'commit' and not blocked) or ARGV[1] == 'count' or charging then
  for _, key in ipairs(order) do
    local st = states[key]
    st.item.alg.save(key, st.state, st.item)
  end
end
return out
