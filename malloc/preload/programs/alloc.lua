-- Allocation-heavy Lua workload with deterministic output (checksums only).
-- Usage: lua5.4 alloc.lua [SCALE]   (SCALE 1: about a second with glibc)
-- Every table, string and closure here is a malloc'd block in Lua 5.4 (l_alloc
-- calls realloc/free), so the run exercises small allocations, reallocs of
-- growing tables and strings, and frees by the collector.
local scale = tonumber(arg[1] or "1")

-- Deterministic 31-bit LCG, so that no result depends on math.random's seeding.
local seed = 12345
local function rnd(n)
  seed = (seed * 1103515245 + 12345) % 2147483648
  return seed % n
end

-- 1. binary-trees (the benchmarks-game program): many short-lived small tables.
local function bottom_up(depth)
  if depth == 0 then return {} end
  depth = depth - 1
  return { bottom_up(depth), bottom_up(depth) }
end
local function check(tree)
  if tree[1] then return 1 + check(tree[1]) + check(tree[2]) end
  return 1
end
local max_depth = 12 + math.floor(math.log(scale, 2) + 0.5)
if max_depth < 8 then max_depth = 8 end
do
  local stretch = max_depth + 1
  print(string.format("stretch tree of depth %d\t check: %d", stretch, check(bottom_up(stretch))))
  local long_lived = bottom_up(max_depth)
  for depth = 4, max_depth, 2 do
    local iters = 2 ^ (max_depth - depth + 4)
    local sum = 0
    for _ = 1, iters do sum = sum + check(bottom_up(depth)) end
    print(string.format("%d\t trees of depth %d\t check: %d", iters, depth, sum))
  end
  print(string.format("long lived tree of depth %d\t check: %d", max_depth, check(long_lived)))
end

-- 2. Strings: building, concatenation, gsub, interning of many distinct strings.
do
  local n = math.floor(60000 * scale)
  local parts = {}
  for i = 1, n do
    parts[#parts + 1] = string.format("%d:%x;", i, rnd(1 << 30))
  end
  local s = table.concat(parts)
  local count = 0
  local t = s:gsub("(%d+):(%x+);", function(a, b)
    count = count + 1
    return b .. a
  end)
  local words = {}
  for w in t:gmatch("%x%x%x%x") do words[w] = (words[w] or 0) + 1 end
  local distinct, h = 0, 0
  for w, c in pairs(words) do
    distinct = distinct + 1
    h = (h + c * (tonumber(w, 16) % 65521)) % 4294967291
  end
  local acc = ""
  for i = 1, math.floor(2000 * scale) do
    acc = acc .. string.char(65 + i % 26)
    if #acc > 512 then acc = acc:sub(200) end
  end
  print(string.format("strings: len %d subs %d distinct %d hash %d tail %s",
    #s, count, distinct, h, acc:sub(-16)))
end

-- 3. Tables: sort records, a hash map with deletions, arrays grown and shrunk.
do
  local n = math.floor(100000 * scale)
  local recs = {}
  for i = 1, n do
    recs[i] = { key = rnd(1000000), id = i, name = "r" .. rnd(100000) }
  end
  table.sort(recs, function(a, b)
    if a.key ~= b.key then return a.key < b.key end
    return a.id < b.id
  end)
  local h = 0
  for i = 1, n, 97 do h = (h * 31 + recs[i].key + #recs[i].name) % 4294967291 end
  print(string.format("sort: first %d last %d hash %d", recs[1].key, recs[n].key, h))

  local map, live = {}, 0
  for i = 1, 3 * n do
    local k = "k" .. rnd(n)
    if map[k] then
      map[k] = nil
      live = live - 1
    else
      map[k] = { i, tostring(i) }
      live = live + 1
    end
  end
  local sum = 0
  for _, v in pairs(map) do sum = (sum + v[1]) % 4294967291 end
  print(string.format("map: live %d sum %d", live, sum))

  local q, total = {}, 0
  for round = 1, 20 do
    for i = 1, math.floor(n / 10) do q[#q + 1] = { round, i } end
    while #q > math.floor(n / 40) do
      local e = table.remove(q)
      total = total + e[1] + e[2]
    end
  end
  print(string.format("queue: left %d total %d", #q, total))
end

-- 4. Closures and coroutines.
do
  local n = math.floor(20000 * scale)
  local gens = {}
  for i = 1, 64 do
    gens[i] = coroutine.wrap(function()
      local acc = i
      for j = 1, n do
        acc = (acc * 7 + j) % 1000003
        coroutine.yield(acc)
      end
    end)
  end
  local s = 0
  for _ = 1, n do
    for i = 1, 64 do s = (s + gens[i]()) % 4294967291 end
  end
  local fs = {}
  for i = 1, n do fs[i] = function(x) return x + i end end
  local t = 0
  for i = 1, n do t = fs[i](t) % 4294967291 end
  print(string.format("closures: coroutines %d calls %d", s, t))
end
print(string.format("memory in use (KiB, rounded to MiB): %d", math.floor(collectgarbage("count") / 1024) * 1024))
