-- floodgate-server's Redis script, part 2 of 5 (see check.lua): exact integer arithmetic.
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

