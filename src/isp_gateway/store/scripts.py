"""The Lua scripts the Redis store runs, each one atomic step in one round trip."""

# `take_if` in one round trip, atomic: the counters of every series read, the rule evaluated
# as `kit.storage.rule_holds` does, and on success the last counter of each series marked
# `take` incremented (given its ttl when that creates it). KEYS: the series' keys, series
# after series; ARGV[1]: {"sizes": [keys per series], "ttls": [ms], "take": [0|1],
# "rule": [[[[[[index, coefficient], ...], limit], ...], ...], ...]} with 0-based indexes.
# Returns {taken (0|1), every counter as read}.
TAKE_IF = """
local spec = cjson.decode(ARGV[1])
local read = {}
if #KEYS > 0 then read = redis.call('MGET', unpack(KEYS)) end
local counts, sums, at = {}, {}, 0
for s = 1, #spec.sizes do
  local total = 0
  for _ = 1, spec.sizes[s] do
    at = at + 1
    local value = tonumber(read[at]) or 0
    counts[at] = value
    total = total + value
  end
  sums[s] = total
end
local taken = 1
for _, clause in ipairs(spec.rule) do
  local any = false
  for _, alternative in ipairs(clause) do
    local all = true
    for _, bound in ipairs(alternative) do
      local total = 0
      for _, term in ipairs(bound[1]) do total = total + term[2] * sums[term[1] + 1] end
      if total > bound[2] then all = false break end
    end
    if all then any = true break end
  end
  if not any then taken = 0 break end
end
if taken == 1 then
  at = 0
  for s = 1, #spec.sizes do
    at = at + spec.sizes[s]
    if spec.take[s] == 1 and spec.sizes[s] > 0 then
      redis.call('INCR', KEYS[at])
      if redis.call('PTTL', KEYS[at]) < 0 then redis.call('PEXPIRE', KEYS[at], spec.ttls[s]) end
    end
  end
end
local out = {taken}
for i = 1, at do out[i + 1] = counts[i] end
return out
"""

# `lease`: take or renew a key for one owner (ARGV[1]) for ARGV[2] ms, or give it up with
# 0; refused (0) while another owner holds it.
LEASE = """local v = redis.call('GET', KEYS[1]) if v and v ~= ARGV[1] then return 0 end
if ARGV[2] == '0' then redis.call('DEL', KEYS[1]) return 1 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1"""
