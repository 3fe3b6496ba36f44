"""The Lua scripts of the Redis cache (``redis_cache.RedisMessageCache``), single node and cluster.

Each script touches the keys of one conversation only (one hash slot), so each is valid on a
cluster and runs on the master of that slot. docs/redis.md explains the fill guard and the
cluster stamps they implement.
"""

from __future__ import annotations

# Generations are random tokens, never counters: a generation key that vanished (eviction,
# restart without persistence) and came back can never repeat the value a reader saw.

# KEYS[1] generation, KEYS[2..] slot keys; ARGV[1] generation seen by the reader ('' = none),
# ARGV[2] ttl, ARGV[3] a fresh token, ARGV[4..] values in KEYS order.
# A reader that saw no generation only starts one: with nothing to compare, it cannot tell
# whether an invalidation came and went while it read the store.
FILL = """
local current = redis.call('GET', KEYS[1])
if not current then
  redis.call('SET', KEYS[1], ARGV[3], 'EX', ARGV[2])
  return 0
end
if current ~= ARGV[1] then return 0 end
redis.call('EXPIRE', KEYS[1], ARGV[2])
for i = 2, #KEYS do
  redis.call('SET', KEYS[i], ARGV[i + 2], 'EX', ARGV[2])
end
return 1
"""

# KEYS[1] generation, KEYS[2..] slot keys; ARGV[1] ttl, ARGV[2] a fresh token.
INVALIDATE = """
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[1])
for i = 2, #KEYS, 500 do
  redis.call('DEL', unpack(KEYS, i, math.min(i + 499, #KEYS)))
end
return 1
"""

# The cluster variants stamp the generation ("<stamp><token>") and every slot value
# ("<stamp><json>") with where and when they were written: "<replid>/<epoch>|", the writing
# master's replication id and the cluster's current epoch. A failover gives the promoted replica
# a new replication id and raises the epoch of every master that serves again (they voted for
# it, or learn of it before their slots are ok again). So after a failover nothing written
# before it counts: neither what the promoted replica inherited (invalidations its master lost)
# nor what the other masters held while the cluster refused every command (invalidations
# nobody could deliver). A ticket from before fills nothing. INFO and CLUSTER INFO are the one
# way a script can learn either.
STAMP = """
local stamp = string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)') .. '/' ..
  string.match(redis.call('CLUSTER', 'INFO'), 'cluster_current_epoch:(%d+)') .. '|'
"""

# KEYS[1] generation, KEYS[2..] slot keys: the generation, then each slot, or false.
CLUSTER_READ = (
    STAMP
    + """
local n = #stamp
local values = {}
for i = 1, #KEYS, 500 do
  local part = redis.call('MGET', unpack(KEYS, i, math.min(i + 499, #KEYS)))
  for j = 1, #part do values[i + j - 1] = part[j] end
end
for i = 1, #values do
  local v = values[i]
  if v and string.sub(v, 1, n) ~= stamp then values[i] = false
  elseif v and i > 1 then values[i] = string.sub(v, n + 1) end
end
return values
"""
)

# As FILL.
CLUSTER_FILL = (
    STAMP
    + """
local current = redis.call('GET', KEYS[1])
if not current or string.sub(current, 1, #stamp) ~= stamp then
  redis.call('SET', KEYS[1], stamp .. ARGV[3], 'EX', ARGV[2])
  return 0
end
if current ~= ARGV[1] then return 0 end
redis.call('EXPIRE', KEYS[1], ARGV[2])
for i = 2, #KEYS do
  redis.call('SET', KEYS[i], stamp .. ARGV[i + 2], 'EX', ARGV[2])
end
return 1
"""
)

# As INVALIDATE.
CLUSTER_INVALIDATE = (
    STAMP
    + """
redis.call('SET', KEYS[1], stamp .. ARGV[2], 'EX', ARGV[1])
for i = 2, #KEYS, 500 do
  redis.call('DEL', unpack(KEYS, i, math.min(i + 499, #KEYS)))
end
return 1
"""
)

# The pull's lookup (``get_view``), after a ``stamp`` prelude ('' on a single Redis).
# KEYS[1] generation, KEYS[2] conversation watermarks, KEYS[3] the viewer's floor; ARGV[1] the
# slot key base, ARGV[2] the mark key base, ARGV[3] ':' .. viewer, ARGV[4] latest count (0: the
# listed seqs ARGV[5..]). Returns {generation, conversation marks, user floor} when either
# watermark part misses, else those and {seqs read}, {slot values}, {viewer marks}.
# The seqs mirror domain.model.Watermarks.latest / visible; Python re-applies the domain rule
# and treats anything else as a miss. Seqs above 15 digits (beyond exact doubles) read nothing
# here for latest; listed seqs keep their own text in key names. The slot keys are built here
# from the conversation's key bases: same hash tag as KEYS, so the same cluster slot.
VIEW_BODY = """
local n = #stamp
local function fresh(v)
  if v and string.sub(v, 1, n) == stamp then return string.sub(v, n + 1) end
  return false
end
local function mget(keys)
  local values = {}
  for i = 1, #keys, 500 do
    local part = redis.call('MGET', unpack(keys, i, math.min(i + 499, #keys)))
    for j = 1, #part do values[i + j - 1] = fresh(part[j]) end
  end
  return values
end
local head = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3])
local gen = head[1]
if gen and string.sub(gen, 1, n) ~= stamp then gen = false end
local conv, user = fresh(head[2]), fresh(head[3])
if not conv or not user then return {gen, conv, user} end
local top_text, min_text = string.match(conv, '^(%d+),(%d+)$')
if not top_text or not string.match(user, '^%d+$') then return {gen, false, false} end
local top = tonumber(top_text)
local floor = math.max(tonumber(min_text), tonumber(user))
local count = tonumber(ARGV[4])
local seqs = {}
if count > 0 then
  if #top_text <= 15 then
    for s = math.max(top - count + 1, floor, 1), top do seqs[#seqs + 1] = string.format('%d', s) end
  end
else
  for i = 5, #ARGV do
    local s = tonumber(ARGV[i])
    if s >= floor and s <= top then seqs[#seqs + 1] = ARGV[i] end
  end
end
local slot_keys, mark_keys = {}, {}
for i = 1, #seqs do
  slot_keys[i] = ARGV[1] .. seqs[i]
  mark_keys[i] = ARGV[2] .. seqs[i] .. ARGV[3]
end
local slots, marks = {}, {}
if #seqs > 0 then slots, marks = mget(slot_keys), mget(mark_keys) end
return {gen, conv, user, seqs, slots, marks}
"""
VIEW = "local stamp = ''\n" + VIEW_BODY
CLUSTER_VIEW = STAMP + VIEW_BODY
