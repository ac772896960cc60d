-- dbsweep: a sysbench script run through this wrapper reports, beside sysbench's own per-second
-- lines, what they cannot show: the longest transaction that completed in each second, and every
-- transaction that took long, with its start and end. A second in which nothing completed (a stall)
-- then still carries how long its transactions had been waiting.
--
-- It also survives a lost connection (a node killed behind a proxy, a server restarted): sysbench
-- 1.0.20 cannot (with --mysql-ignore-errors=all it does not reconnect at all, and its own reconnect
-- reuses a closed handle of the MariaDB client library and crashes). Here the thread closes what is
-- left, opens a new connection through the script's own thread_init (retrying every 100 ms until the
-- window is over), and the transaction starts again, counted as an error, not as a transaction.
--
-- The script to run is DBSWEEP_SCRIPT (a name sysbench finds, e.g. oltp_read_write, or a path);
-- seconds are counted from DBSWEEP_ORIGIN (epoch seconds, the measured window's start). Each thread
-- writes to stderr, one line per second it completed something in and one per long transaction:
--   dbsweep-max <second> <ms>          the longest transaction that ended in that second
--   dbsweep-long <start> <end>         a transaction of DBSWEEP_LONG_MS or more (epoch seconds)
--   dbsweep-lost <time> <error>        a transaction lost its connection (epoch seconds)
--   dbsweep-reconnected <time> <s>     a new connection, after that many seconds without one

local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } dbsweep_timespec;
int clock_gettime(int clock_id, dbsweep_timespec *tp);
int usleep(unsigned int usec);
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

local inner_event, inner_init, inner_done = event, thread_init, thread_done
-- MariaDB/MySQL client errors of a connection that is gone, and PostgreSQL's SQLSTATE classes of one.
local LOST = {[2002] = true, [2003] = true, [2006] = true, [2013] = true, [2055] = true, [1053] = true,
              [1927] = true, [4031] = true}

local function lost(err)
  local text = tostring(err)
  local errno = tonumber(text:match("errno = (%d+)"))
  local state = text:match("state = '(%w+)'") or ""
  return (errno ~= nil and LOST[errno]) or state:sub(1, 2) == "08" or state:sub(1, 4) == "57P0"
end

local function reconnect(err)
  local since = now()
  io.stderr:write(string.format("dbsweep-lost %.6f %s\n", since, tostring(err):gsub("%s+", " ")))
  pcall(inner_done)
  local deadline = origin + (tonumber(sysbench.opt.time) or 0) + 1
  while true do
    local ok, why = pcall(inner_init)
    if ok then
      io.stderr:write(string.format("dbsweep-reconnected %.6f %.3f\n", now(), now() - since))
      return
    end
    if now() > deadline then
      error(why, 0)
    end
    ffi.C.usleep(100000)
  end
end
local second, worst = nil, 0

local function flush()
  if second ~= nil then
    io.stderr:write(string.format("dbsweep-max %d %.3f\n", second, worst * 1000))
  end
  second, worst = nil, 0
end

function event(...)
  local start = now()
  local ok, err = pcall(inner_event, ...)
  if not ok then
    if type(err) == "table" or not lost(err) then
      error(err, 0)  -- sysbench's own: an ignored error restarts the event, anything else is fatal
    end
    reconnect(err)
    error({errcode = sysbench.error.RESTART_EVENT}, 0)  -- thread_run starts the event again
  end
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
