// The shared window of a unit's rate limit in Redis: one Lua script reads the window, decides and
// counts in one step, on Redis's own clock, so every workers process sees the same count and the same
// time. A sliding-window counter: the window of `windowMs` now and the one before it, the earlier
// one's count weighted by how much of it the sliding window still covers. Admitted while
//   previous × (windowMs − elapsed) / windowMs + current < max
// (the estimate before this one; with `+ 1 ≤ max` an evenly paced stream settles at max − 1 a window),
// so no fixed window ever admits more than `max`, and one hash of three fields per key, whatever `max`.
// The estimate takes the previous window as evenly spread: right after a burst at a window's end, a
// second can hold up to twice `max`; over any longer stretch the pace is `max` per window.
// Refused, the script says how long until the estimate has room for one more (ms).
//
// Like every Redis call of the service this one is bounded by the client's command timeout and never
// authoritative: an error (Redis down, slow, a script refused) hands the window to the database
// (src/work/runtime/execute/rate-window.ts).
import type { Redis } from 'ioredis';
import { createHash } from 'node:crypto';

/** What a limiter answers: admitted now, or the ms until the window has room. */
export type RateDecision = { admitted: true } | { admitted: false; waitMs: number };

// Integers throughout (ms, counts): doubles would make the boundary case refuse by a rounding error.
// A window index that went backwards (Redis's clock stepped back) keeps the newer window.
const SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local max = tonumber(ARGV[1])
local win = tonumber(ARGV[2])
local idx = math.floor(now / win)
local elapsed = now - idx * win
local h = redis.call('HMGET', KEYS[1], 'w', 'c', 'p')
local w = tonumber(h[1])
local c, p = 0, 0
if w ~= nil then
  if w >= idx then
    if w > idx then idx = w; elapsed = 0 end
    c = tonumber(h[2]) or 0
    p = tonumber(h[3]) or 0
  elseif w == idx - 1 then
    p = tonumber(h[2]) or 0
  end
end
if p * (win - elapsed) + c * win < max * win then
  redis.call('HSET', KEYS[1], 'w', idx, 'c', c + 1, 'p', p)
  redis.call('PEXPIRE', KEYS[1], 2 * win + 1000)
  return {1, 0}
end
local wait
if c < max then
  wait = (win - elapsed) - win * (max - c) / p
else
  wait = (win - elapsed) + win - win * max / c
end
return {0, math.max(1, math.floor(wait) + 1)}
`;
const SCRIPT_SHA = createHash('sha1').update(SCRIPT).digest('hex');

/**
 * Admits one execution under `max` per `windowMs` at `key` (src/kv/keys.ts rateLimitKey), or says how
 * long to wait. Throws on any Redis failure: the caller falls back to the database's window.
 */
export async function admitInRedis(redis: Redis, key: string, max: number, windowMs: number): Promise<RateDecision> {
  let reply: unknown;
  try {
    reply = await redis.evalsha(SCRIPT_SHA, 1, key, max, windowMs);
  } catch (error) {
    // The first call on a server (or after its restart): load the script by sending it whole.
    if (!/NOSCRIPT/.test((error as Error).message ?? '')) throw error;
    reply = await redis.eval(SCRIPT, 1, key, max, windowMs);
  }
  const [admitted, waitMs] = reply as [number, number];
  return admitted === 1 ? { admitted: true } : { admitted: false, waitMs: Math.max(1, Number(waitMs)) };
}
