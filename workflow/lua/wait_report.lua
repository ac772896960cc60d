-- dbsweep: a sysbench script run through this wrapper reports, beside sysbench's own per-second
-- lines, what they cannot show: the longest transaction that completed in each second, and every
-- transaction that took long, with its start and end. A second in which nothing completed (a stall)
-- then still carries how long its transactions had been waiting.
--
-- The script to run is DBSWEEP_SCRIPT (a name sysbench finds, e.g. oltp_read_write, or a path);
-- seconds are counted from DBSWEEP_ORIGIN (epoch seconds, the measured window's start). Each thread
-- writes to stderr, one line per second it completed something in and one per long transaction:
--   dbsweep-max <second> <ms>          the longest transaction that ended in that second
--   dbsweep-long <start> <end>         a transaction of DBSWEEP_LONG_MS or more (epoch seconds)

local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } dbsweep_timespec;
int clock_gettime(int clock_id, dbsweep_timespec *tp);
]]
local REALTIME = 0  -- CLOCK_REALTIME: the clock of the run's other samples
local now_ts = ffi.new("dbsweep_timespec")
local function now()
  ffi.C.clock_gettime(REALTIME, now_ts)
  return tonumber(now_ts.tv_sec) + tonumber(now_ts.tv_nsec) * 1e-9
end

local script = assert(os.getenv("DBSWEEP_SCRIPT"), "DBSWEEP_SCRIPT is not set")
local origin = tonumber(os.getenv("DBSWEEP_ORIGIN") or "") or now()
local long_s = (tonumber(os.getenv("DBSWEEP_LONG_MS") or "") or 250) / 1000

if script:find("/", 1, true) then
  dofile(script)
else
  require(script)
end

local inner_event, inner_done = event, thread_done
local second, worst = nil, 0

local function flush()
  if second ~= nil then
    io.stderr:write(string.format("dbsweep-max %d %.3f\n", second, worst * 1000))
  end
  second, worst = nil, 0
end

function event(...)
  local start = now()
  inner_event(...)
  local done = now()
  local took = done - start
  local k = math.ceil(done - origin)
  if k ~= second then
    flush()
    second = k
  end
  if took > worst then worst = took end
  if took >= long_s then
    io.stderr:write(string.format("dbsweep-long %.6f %.6f\n", start, done))
  end
end

function thread_done(...)
  flush()
  if inner_done then return inner_done(...) end
end
