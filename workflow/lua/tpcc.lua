-- A TPC-C-like workload for sysbench 1.0.20, written for dbsweep from the TPC-C
-- specification (revision 5.11): its nine tables and their initial population
-- (clause 4.3), the five transaction profiles (clause 2), and the consistency
-- conditions (clause 3.3.2). Not a TPC-C: no terminals, keying or think times,
-- and every transaction picks its warehouse at random.
--
--   sysbench tpcc.lua --tables=N --scale=W --threads=T prepare   (parallel)
--   sysbench tpcc.lua --tables=N --scale=W --threads=T --time=S run
--   sysbench tpcc.lua --tables=N --scale=W --threads=T check     (parallel)
--   sysbench tpcc.lua --tables=N cleanup
--
-- MySQL-family (InnoDB, MyRocks) and PostgreSQL, by --db-driver.
--
-- Machine-readable lines (one JSON object after a fixed word, so a parser needs
-- no guessing):
--   run:   "tpcc-thread {...}" per thread at its end: committed transactions per type,
--          New-Order rollbacks (the 1% invalid item), and retries per SQL error
--   check: "tpcc-check {...}" per failing (table set, warehouse, condition), and
--          "tpcc-check-done {...}" per thread with the warehouses and conditions it checked

local ffi = require("ffi")
ffi.cdef [[ int usleep(unsigned int usec); ]]

sysbench.cmdline.options = {
   tables = {"Number of independent table sets", 1},
   scale = {"Warehouses per table set", 1},
   foreign_keys = {"Declare the specification's foreign keys", false},
   isolation = {"Transaction isolation: RR, RC or SERIALIZABLE", "RC"},
   purge = {"If > 0, Delivery deletes the order (and its lines) delivered this many orders earlier " ..
            "in the district, keeping the data size bounded; 0 keeps everything", 0},
   mysql_storage_engine = {"Table engine (MySQL-family); empty: the server's default", ""},
}

local DISTRICTS, CUSTOMERS, ITEMS, ORDERS, NEW_ORDERS = 10, 3000, 100000, 3000, 900
-- NURand constants (clause 2.1.6): C for C_LAST at load and in the run differ by 66,
-- within the 65..119 the specification allows (and not 96 or 112).
local C_LAST_LOAD, C_LAST_RUN, C_ID, C_ITEM = 157, 223, 259, 7911
local SYLLABLES = {"BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"}
local TYPES = {"new_order", "payment", "order_status", "delivery", "stock_level"}
local ISOLATION = {RR = "REPEATABLE READ", RC = "READ COMMITTED", SERIALIZABLE = "SERIALIZABLE"}

local rand = sysbench.rand.uniform

local function opt_int(name, minimum)
   local v = tonumber(sysbench.opt[name])
   if v == nil or v ~= math.floor(v) or v < minimum then
      error(string.format("--%s=%s: not a whole number >= %d", name, tostring(sysbench.opt[name]), minimum))
   end
   return v
end

local function settings()
   local s = {tables = opt_int("tables", 1), scale = opt_int("scale", 1), purge = opt_int("purge", 0)}
   s.isolation = ISOLATION[string.upper(sysbench.opt.isolation)]
   if s.isolation == nil then
      error("--isolation=" .. sysbench.opt.isolation .. ": not one of RR, RC, SERIALIZABLE")
   end
   return s
end

local S, drv, con, pg -- settings are read when a thread starts (sysbench.opt is not there at load)

local function connect()
   S = settings()
   drv = sysbench.sql.driver()
   con = drv:connect()
   pg = drv:name() == "pgsql"
end

-- ---------------------------------------------------------------- helpers

local function q(sql, ...)
   return con:query(string.format(sql, ...))
end

local function row(sql, ...)
   local rs = q(sql, ...)
   if rs == nil or rs.nrows == 0 then
      return nil
   end
   return rs:fetch_row()
end

local function rows(sql, ...)
   local rs = q(sql, ...)
   local out = {}
   if rs == nil then
      return out
   end
   for i = 1, rs.nrows do
      local r = rs:fetch_row()
      local copy = {}
      for j = 1, rs.nfields do
         copy[j] = r[j]
      end
      out[i] = copy
   end
   return out
end

local function nurand(a, c, x, y)
   return (((bit.bor(rand(0, a), rand(x, y))) + c) % (y - x + 1)) + x
end

local function last_name(n)
   return SYLLABLES[math.floor(n / 100) + 1] .. SYLLABLES[math.floor(n / 10) % 10 + 1] .. SYLLABLES[n % 10 + 1]
end

-- Random strings come from a pool of random characters, cut at random places: the load
-- writes tens of MB of them, and one rand() per character would dominate it.
local ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
local POOL, NPOOL
local function make_pool()
   local t = {}
   for i = 1, 4096 do
      local k = rand(1, #ALNUM)
      t[i] = ALNUM:sub(k, k)
   end
   POOL, NPOOL = table.concat(t), 4096
end

local function astring(lo, hi)
   local n = rand(lo, hi)
   local at = rand(1, NPOOL - n)
   return POOL:sub(at, at + n - 1)
end

local function nstring(lo, hi)
   local n = rand(lo, hi)
   local t = {}
   for i = 1, n do
      t[i] = rand(0, 9)
   end
   return table.concat(t)
end

local function zip()
   return nstring(4, 4) .. "11111"
end

-- 10% of I_DATA and S_DATA hold "ORIGINAL" at a random place (clause 4.3.3.1)
local function data_string()
   local s = astring(26, 50)
   if rand(1, 10) == 1 then
      local at = rand(1, #s - 8)
      s = s:sub(1, at - 1) .. "ORIGINAL" .. s:sub(at + 8)
   end
   return s
end

local function money(lo_cents, hi_cents)
   return string.format("%.2f", rand(lo_cents, hi_cents) / 100)
end

local function now()
   return pg and "LOCALTIMESTAMP" or "NOW()"
end

local function other_warehouse(w)
   local o = rand(1, S.scale - 1)
   return o >= w and o + 1 or o
end

-- ---------------------------------------------------------------- schema

local function engine_clause()
   if pg or sysbench.opt.mysql_storage_engine == "" then
      return ""
   end
   return " ENGINE=" .. sysbench.opt.mysql_storage_engine
end

local function ddl(set)
   local n = set
   local ts = pg and "TIMESTAMP" or "DATETIME"
   local fk = sysbench.opt.foreign_keys
   local function ref(cols, tbl, tcols)
      return fk and string.format(",\n FOREIGN KEY (%s) REFERENCES %s%d (%s)", cols, tbl, n, tcols) or ""
   end
   return {
      string.format([[CREATE TABLE warehouse%d (
 w_id INT NOT NULL, w_name VARCHAR(10), w_street_1 VARCHAR(20), w_street_2 VARCHAR(20),
 w_city VARCHAR(20), w_state CHAR(2), w_zip CHAR(9), w_tax DECIMAL(4,4), w_ytd DECIMAL(12,2),
 PRIMARY KEY (w_id))]], n),
      string.format([[CREATE TABLE district%d (
 d_id INT NOT NULL, d_w_id INT NOT NULL, d_name VARCHAR(10), d_street_1 VARCHAR(20),
 d_street_2 VARCHAR(20), d_city VARCHAR(20), d_state CHAR(2), d_zip CHAR(9), d_tax DECIMAL(4,4),
 d_ytd DECIMAL(12,2), d_next_o_id INT,
 PRIMARY KEY (d_w_id, d_id)%s)]], n, ref("d_w_id", "warehouse", "w_id")),
      string.format([[CREATE TABLE customer%d (
 c_id INT NOT NULL, c_d_id INT NOT NULL, c_w_id INT NOT NULL, c_first VARCHAR(16), c_middle CHAR(2),
 c_last VARCHAR(16), c_street_1 VARCHAR(20), c_street_2 VARCHAR(20), c_city VARCHAR(20),
 c_state CHAR(2), c_zip CHAR(9), c_phone CHAR(16), c_since %s, c_credit CHAR(2),
 c_credit_lim DECIMAL(12,2), c_discount DECIMAL(4,4), c_balance DECIMAL(12,2),
 c_ytd_payment DECIMAL(12,2), c_payment_cnt INT, c_delivery_cnt INT, c_data VARCHAR(500),
 PRIMARY KEY (c_w_id, c_d_id, c_id)%s)]], n, ts, ref("c_w_id, c_d_id", "district", "d_w_id, d_id")),
      string.format("CREATE INDEX customer%d_name ON customer%d (c_w_id, c_d_id, c_last, c_first)", n, n),
      string.format([[CREATE TABLE history%d (
 h_c_id INT, h_c_d_id INT, h_c_w_id INT, h_d_id INT, h_w_id INT, h_date %s,
 h_amount DECIMAL(6,2), h_data VARCHAR(24)%s%s)]], n, ts,
         ref("h_c_w_id, h_c_d_id, h_c_id", "customer", "c_w_id, c_d_id, c_id"),
         ref("h_w_id, h_d_id", "district", "d_w_id, d_id")),
      string.format([[CREATE TABLE orders%d (
 o_id INT NOT NULL, o_d_id INT NOT NULL, o_w_id INT NOT NULL, o_c_id INT, o_entry_d %s,
 o_carrier_id INT, o_ol_cnt INT, o_all_local INT,
 PRIMARY KEY (o_w_id, o_d_id, o_id)%s)]], n, ts, ref("o_w_id, o_d_id, o_c_id", "customer", "c_w_id, c_d_id, c_id")),
      string.format("CREATE INDEX orders%d_customer ON orders%d (o_w_id, o_d_id, o_c_id, o_id)", n, n),
      string.format([[CREATE TABLE new_order%d (
 no_o_id INT NOT NULL, no_d_id INT NOT NULL, no_w_id INT NOT NULL,
 PRIMARY KEY (no_w_id, no_d_id, no_o_id)%s)]], n, ref("no_w_id, no_d_id, no_o_id", "orders", "o_w_id, o_d_id, o_id")),
      string.format([[CREATE TABLE item%d (
 i_id INT NOT NULL, i_im_id INT, i_name VARCHAR(24), i_price DECIMAL(5,2), i_data VARCHAR(50),
 PRIMARY KEY (i_id))]], n),
      string.format([[CREATE TABLE stock%d (
 s_i_id INT NOT NULL, s_w_id INT NOT NULL, s_quantity INT,
 s_dist_01 CHAR(24), s_dist_02 CHAR(24), s_dist_03 CHAR(24), s_dist_04 CHAR(24), s_dist_05 CHAR(24),
 s_dist_06 CHAR(24), s_dist_07 CHAR(24), s_dist_08 CHAR(24), s_dist_09 CHAR(24), s_dist_10 CHAR(24),
 s_ytd INT, s_order_cnt INT, s_remote_cnt INT, s_data VARCHAR(50),
 PRIMARY KEY (s_w_id, s_i_id)%s%s)]], n, ref("s_w_id", "warehouse", "w_id"), ref("s_i_id", "item", "i_id")),
      string.format([[CREATE TABLE order_line%d (
 ol_o_id INT NOT NULL, ol_d_id INT NOT NULL, ol_w_id INT NOT NULL, ol_number INT NOT NULL,
 ol_i_id INT, ol_supply_w_id INT, ol_delivery_d %s, ol_quantity INT, ol_amount DECIMAL(6,2),
 ol_dist_info CHAR(24),
 PRIMARY KEY (ol_w_id, ol_d_id, ol_o_id, ol_number)%s%s)]], n, ts,
         ref("ol_w_id, ol_d_id, ol_o_id", "orders", "o_w_id, o_d_id, o_id"),
         ref("ol_supply_w_id, ol_i_id", "stock", "s_w_id, s_i_id")),
   }
end

local TABLE_NAMES = {"warehouse", "district", "customer", "history", "orders", "new_order", "item", "stock", "order_line"}

local function create_tables(set)
   for _, sql in ipairs(ddl(set)) do
      if sql:sub(1, 12) == "CREATE TABLE" then
         sql = sql .. engine_clause()
      end
      con:query(sql)
   end
end

-- ---------------------------------------------------------------- load

local function bulk(head, gen, n)
   con:bulk_insert_init(head)
   for i = 1, n do
      con:bulk_insert_next(gen(i))
   end
   con:bulk_insert_done()
end

local function load_items(set)
   bulk(string.format("INSERT INTO item%d (i_id, i_im_id, i_name, i_price, i_data) VALUES", set), function(i)
      return string.format("(%d,%d,'%s',%s,'%s')", i, rand(1, 10000), astring(14, 24), money(100, 10000), data_string())
   end, ITEMS)
end

local function address()
   return string.format("'%s','%s','%s','%s','%s'", astring(10, 20), astring(10, 20), astring(10, 20),
                        astring(2, 2), zip())
end

local function load_warehouse_row(set, w)
   q("INSERT INTO warehouse%d VALUES (%d,'%s',%s,%s,300000.00)", set, w, astring(6, 10), address(),
     string.format("%.4f", rand(0, 2000) / 10000))
end

local function load_stock(set, w)
   bulk(string.format("INSERT INTO stock%d VALUES", set), function(i)
      local d = {}
      for k = 1, 10 do
         d[k] = astring(24, 24)
      end
      return string.format("(%d,%d,%d,'%s',0,0,0,'%s')", i, w, rand(10, 100), table.concat(d, "','"), data_string())
   end, ITEMS)
end

-- One district: its row, customers, history, orders, new orders and order lines.
local function load_district(set, w, d)
   do
      q("INSERT INTO district%d VALUES (%d,%d,'%s',%s,%s,30000.00,%d)", set, d, w, astring(6, 10), address(),
        string.format("%.4f", rand(0, 2000) / 10000), ORDERS + 1)
      bulk(string.format("INSERT INTO customer%d VALUES", set), function(c)
         local name = last_name(c <= 1000 and c - 1 or nurand(255, C_LAST_LOAD, 0, 999))
         return string.format("(%d,%d,%d,'%s','OE','%s',%s,'%s',%s,'%s',50000.00,%s,-10.00,10.00,1,0,'%s')",
                              c, d, w, astring(8, 16), name, address(), nstring(16, 16), now(),
                              rand(1, 10) == 1 and "BC" or "GC", string.format("%.4f", rand(0, 5000) / 10000),
                              astring(300, 500))
      end, CUSTOMERS)
      bulk(string.format("INSERT INTO history%d VALUES", set), function(c)
         return string.format("(%d,%d,%d,%d,%d,%s,10.00,'%s')", c, d, w, d, w, now(), astring(12, 24))
      end, CUSTOMERS)
      -- O_C_ID is a random permutation of the customers (clause 4.3.3.1)
      local perm = {}
      for i = 1, CUSTOMERS do
         perm[i] = i
      end
      for i = CUSTOMERS, 2, -1 do
         local j = rand(1, i)
         perm[i], perm[j] = perm[j], perm[i]
      end
      local counts = {}
      local delivered = ORDERS - NEW_ORDERS
      bulk(string.format("INSERT INTO orders%d VALUES", set), function(o)
         counts[o] = rand(5, 15)
         return string.format("(%d,%d,%d,%d,%s,%s,%d,1)", o, d, w, perm[o], now(),
                              o <= delivered and tostring(rand(1, 10)) or "NULL", counts[o])
      end, ORDERS)
      bulk(string.format("INSERT INTO new_order%d VALUES", set), function(i)
         return string.format("(%d,%d,%d)", delivered + i, d, w)
      end, NEW_ORDERS)
      con:bulk_insert_init(string.format("INSERT INTO order_line%d VALUES", set))
      for o = 1, ORDERS do
         for l = 1, counts[o] do
            local old = o <= delivered
            con:bulk_insert_next(string.format("(%d,%d,%d,%d,%d,%d,%s,5,%s,'%s')", o, d, w, l, rand(1, ITEMS), w,
                                               old and now() or "NULL", old and "0.00" or money(1, 999999),
                                               astring(24, 24)))
         end
      end
      con:bulk_insert_done()
   end
end

local function table_exists(name)
   local sql = pg and "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = '%s'"
      or "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = '%s'"
   return tonumber(row(sql, name)[1]) > 0
end

-- Thread 0 creates every set's tables and loads the warehouse rows and the items; then
-- every thread, thread 0 too, loads its share of the units (a warehouse's stock, or one of
-- its districts). The others wait for the last set's last item, which thread 0 writes last.
-- sysbench 1.0.20 exits with 0 when a parallel command fails in a thread: a failed load
-- or check must not look complete, so any error ends the process with 1.
local function or_exit(body, name)
   return function()
      local ok, err = pcall(body)
      if not ok then
         io.stdout:write(string.format("FATAL: tpcc %s failed in thread %d: %s\n", name, sysbench.tid, tostring(err)))
         io.stdout:flush()
         os.exit(1)
      end
   end
end

local function prepare_body()
   connect()
   make_pool()
   if not pg then
      con:query("SET SESSION foreign_key_checks = 0")
      con:query("SET SESSION unique_checks = 0")
   end
   local tid, nthreads = sysbench.tid, sysbench.opt.threads
   if tid == 0 then
      for set = 1, S.tables do
         print(string.format("Creating the tables of set %d", set))
         create_tables(set)
         for w = 1, S.scale do
            load_warehouse_row(set, w)
         end
         load_items(set)
      end
   else
      local last = "item" .. S.tables
      while not (table_exists(last) and row("SELECT 1 FROM %s WHERE i_id = %d", last, ITEMS)) do
         ffi.C.usleep(200000)
      end
   end
   -- PostgreSQL checks foreign keys as rows arrive: order lines need their stock rows, so
   -- a warehouse is then one unit (its stock, then its districts)
   local whole = pg and sysbench.opt.foreign_keys
   local unit = 0
   for set = 1, S.tables do
      for w = 1, S.scale do
         for part = 0, DISTRICTS do
            if unit % nthreads == tid then
               if part == 0 then
                  print(string.format("Loading the stock of warehouse %d of set %d", w, set))
                  load_stock(set, w)
               else
                  load_district(set, w, part)
               end
            end
            if not whole or part == DISTRICTS then
               unit = unit + 1
            end
         end
      end
   end
end

function cmd_cleanup()
   connect()
   for set = 1, S.tables do
      for i = #TABLE_NAMES, 1, -1 do
         q("DROP TABLE IF EXISTS %s%d", TABLE_NAMES[i], set)
      end
   end
end

-- ---------------------------------------------------------------- transactions

local stats = {committed = {}, rollbacks = 0, retries = {}}
local pending -- the type of the transaction being retried after a deadlock or serialization failure

local function begin()
   con:query(pg and "BEGIN" or "START TRANSACTION")
end

local function customer_by_name(set, w, d)
   local name = last_name(nurand(255, C_LAST_RUN, 0, 999))
   local ids = rows("SELECT c_id FROM customer%d WHERE c_w_id = %d AND c_d_id = %d AND c_last = '%s' ORDER BY c_first",
                    set, w, d, name)
   if #ids == 0 then
      return nil
   end
   return tonumber(ids[math.ceil(#ids / 2)][1]) -- position n/2 rounded up (clause 2.5.2.2)
end

local function new_order(set, w)
   local d, c, n = rand(1, DISTRICTS), nurand(1023, C_ID, 1, CUSTOMERS), rand(5, 15)
   local invalid = rand(1, 100) == 1
   local lines, all_local = {}, 1
   for l = 1, n do
      local supply = w
      if S.scale > 1 and rand(1, 100) == 1 then
         supply, all_local = other_warehouse(w), 0
      end
      lines[l] = {item = nurand(8191, C_ITEM, 1, ITEMS), supply = supply, quantity = rand(1, 10)}
   end
   if invalid then
      lines[n].item = ITEMS + 1 -- an unused item number: the transaction rolls back (clause 2.4.1.4)
   end
   begin()
   local w_tax = row("SELECT w_tax FROM warehouse%d WHERE w_id = %d", set, w)[1]
   local dist = row("SELECT d_tax, d_next_o_id FROM district%d WHERE d_w_id = %d AND d_id = %d FOR UPDATE", set, w, d)
   local d_tax, o = dist[1], tonumber(dist[2])
   q("UPDATE district%d SET d_next_o_id = d_next_o_id + 1 WHERE d_w_id = %d AND d_id = %d", set, w, d)
   local cust = row("SELECT c_discount, c_last, c_credit FROM customer%d WHERE c_w_id = %d AND c_d_id = %d AND c_id = %d",
                    set, w, d, c)
   q("INSERT INTO orders%d VALUES (%d,%d,%d,%d,%s,NULL,%d,%d)", set, o, d, w, c, now(), n, all_local)
   q("INSERT INTO new_order%d VALUES (%d,%d,%d)", set, o, d, w)
   for l = 1, n do
      local item = row("SELECT i_price, i_name, i_data FROM item%d WHERE i_id = %d", set, lines[l].item)
      if item == nil then
         con:query("ROLLBACK")
         return "rollback"
      end
      lines[l].price = tonumber(item[1])
   end
   -- stock rows are locked in key order, so that two New-Orders never deadlock on them
   local order = {}
   for l = 1, n do
      order[l] = l
   end
   table.sort(order, function(a, b)
      local x, y = lines[a], lines[b]
      return x.supply < y.supply or (x.supply == y.supply and (x.item < y.item or (x.item == y.item and a < b)))
   end)
   local dist_col = string.format("s_dist_%02d", d)
   for _, l in ipairs(order) do
      local line = lines[l]
      local s = row("SELECT s_quantity, s_data, %s FROM stock%d WHERE s_w_id = %d AND s_i_id = %d FOR UPDATE",
                    dist_col, set, line.supply, line.item)
      local qty = tonumber(s[1])
      qty = qty >= line.quantity + 10 and qty - line.quantity or qty - line.quantity + 91
      q("UPDATE stock%d SET s_quantity = %d, s_ytd = s_ytd + %d, s_order_cnt = s_order_cnt + 1, " ..
        "s_remote_cnt = s_remote_cnt + %d WHERE s_w_id = %d AND s_i_id = %d",
        set, qty, line.quantity, line.supply == w and 0 or 1, line.supply, line.item)
      q("INSERT INTO order_line%d VALUES (%d,%d,%d,%d,%d,%d,NULL,%d,%.2f,'%s')", set, o, d, w, l, line.item,
        line.supply, line.quantity, line.quantity * line.price, s[3])
   end
   local _ = w_tax, d_tax, cust -- the total (clause 2.4.2.2) is the terminal's business
   con:query("COMMIT")
end

local function payment(set, w)
   local d = rand(1, DISTRICTS)
   local c_w, c_d = w, d
   if S.scale > 1 and rand(1, 100) <= 15 then
      c_w, c_d = other_warehouse(w), rand(1, DISTRICTS)
   end
   local amount = money(100, 500000)
   begin()
   local c
   if rand(1, 100) <= 60 then
      c = customer_by_name(set, c_w, c_d)
   else
      c = nurand(1023, C_ID, 1, CUSTOMERS)
   end
   q("UPDATE warehouse%d SET w_ytd = w_ytd + %s WHERE w_id = %d", set, amount, w)
   local wh = row("SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip FROM warehouse%d WHERE w_id = %d", set, w)
   q("UPDATE district%d SET d_ytd = d_ytd + %s WHERE d_w_id = %d AND d_id = %d", set, amount, w, d)
   local di = row("SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip FROM district%d " ..
                  "WHERE d_w_id = %d AND d_id = %d", set, w, d)
   local cu = row("SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, " ..
                  "c_since, c_credit, c_credit_lim, c_discount, c_balance FROM customer%d " ..
                  "WHERE c_w_id = %d AND c_d_id = %d AND c_id = %d FOR UPDATE", set, c_w, c_d, c)
   if cu[11] == "BC" then
      local text = string.format("%d %d %d %d %d %s|", c, c_d, c_w, d, w, amount)
      q("UPDATE customer%d SET c_balance = c_balance - %s, c_ytd_payment = c_ytd_payment + %s, " ..
        "c_payment_cnt = c_payment_cnt + 1, c_data = %s WHERE c_w_id = %d AND c_d_id = %d AND c_id = %d",
        set, amount, amount, pg and string.format("SUBSTR('%s' || c_data, 1, 500)", text)
           or string.format("SUBSTR(CONCAT('%s', c_data), 1, 500)", text), c_w, c_d, c)
   else
      q("UPDATE customer%d SET c_balance = c_balance - %s, c_ytd_payment = c_ytd_payment + %s, " ..
        "c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = %d AND c_d_id = %d AND c_id = %d",
        set, amount, amount, c_w, c_d, c)
   end
   q("INSERT INTO history%d VALUES (%d,%d,%d,%d,%d,%s,%s,'%s')", set, c, c_d, c_w, d, w, now(), amount,
     (wh[1] .. "    " .. di[1]):sub(1, 24))
   con:query("COMMIT")
end

local function order_status(set, w)
   local d = rand(1, DISTRICTS)
   begin()
   local c
   if rand(1, 100) <= 60 then
      c = customer_by_name(set, w, d)
   else
      c = nurand(1023, C_ID, 1, CUSTOMERS)
   end
   row("SELECT c_balance, c_first, c_middle, c_last FROM customer%d WHERE c_w_id = %d AND c_d_id = %d AND c_id = %d",
       set, w, d, c)
   local o = row("SELECT o_id, o_entry_d, o_carrier_id FROM orders%d WHERE o_w_id = %d AND o_d_id = %d AND o_c_id = %d " ..
                 "ORDER BY o_id DESC LIMIT 1", set, w, d, c)
   if o then -- none when a purge removed the customer's last order
      rows("SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line%d " ..
           "WHERE ol_w_id = %d AND ol_d_id = %d AND ol_o_id = %s", set, w, d, o[1])
   end
   con:query("COMMIT")
end

local function delivery(set, w)
   local carrier = rand(1, 10)
   begin()
   for d = 1, DISTRICTS do
      local no = row("SELECT no_o_id FROM new_order%d WHERE no_w_id = %d AND no_d_id = %d ORDER BY no_o_id LIMIT 1 FOR UPDATE",
                     set, w, d)
      if no then -- none: the district is skipped (clause 2.7.4.2)
         local o = tonumber(no[1])
         q("DELETE FROM new_order%d WHERE no_w_id = %d AND no_d_id = %d AND no_o_id = %d", set, w, d, o)
         local c = row("SELECT o_c_id FROM orders%d WHERE o_w_id = %d AND o_d_id = %d AND o_id = %d", set, w, d, o)[1]
         q("UPDATE orders%d SET o_carrier_id = %d WHERE o_w_id = %d AND o_d_id = %d AND o_id = %d", set, carrier, w, d, o)
         q("UPDATE order_line%d SET ol_delivery_d = %s WHERE ol_w_id = %d AND ol_d_id = %d AND ol_o_id = %d",
           set, now(), w, d, o)
         local total = row("SELECT COALESCE(SUM(ol_amount), 0) FROM order_line%d WHERE ol_w_id = %d AND ol_d_id = %d " ..
                           "AND ol_o_id = %d", set, w, d, o)[1]
         q("UPDATE customer%d SET c_balance = c_balance + %s, c_delivery_cnt = c_delivery_cnt + 1 " ..
           "WHERE c_w_id = %d AND c_d_id = %d AND c_id = %s", set, total, w, d, c)
         if S.purge > 0 and o > S.purge then
            q("DELETE FROM order_line%d WHERE ol_w_id = %d AND ol_d_id = %d AND ol_o_id = %d", set, w, d, o - S.purge)
            q("DELETE FROM orders%d WHERE o_w_id = %d AND o_d_id = %d AND o_id = %d", set, w, d, o - S.purge)
         end
      end
   end
   con:query("COMMIT")
end

local function stock_level(set, w)
   local d, threshold = rand(1, DISTRICTS), rand(10, 20)
   begin()
   local next_o = tonumber(row("SELECT d_next_o_id FROM district%d WHERE d_w_id = %d AND d_id = %d", set, w, d)[1])
   row("SELECT COUNT(DISTINCT s_i_id) FROM order_line%d, stock%d WHERE ol_w_id = %d AND ol_d_id = %d " ..
       "AND ol_o_id < %d AND ol_o_id >= %d AND s_w_id = %d AND s_i_id = ol_i_id AND s_quantity < %d",
       set, set, w, d, next_o, next_o - 20, w, threshold)
   con:query("COMMIT")
end

local PROFILES = {new_order = new_order, payment = payment, order_status = order_status,
                  delivery = delivery, stock_level = stock_level}

-- The mix of clause 5.2.3 at its minimums (Payment 43%, the other three 4% each),
-- New-Order taking the remaining 45%.
local function pick()
   local r = rand(1, 100)
   if r <= 45 then
      return "new_order"
   elseif r <= 88 then
      return "payment"
   elseif r <= 92 then
      return "order_status"
   elseif r <= 96 then
      return "delivery"
   end
   return "stock_level"
end

function thread_init()
   connect()
   make_pool()
   q("SET SESSION %s ISOLATION LEVEL %s", pg and "CHARACTERISTICS AS TRANSACTION" or "TRANSACTION", S.isolation)
   for _, t in ipairs(TYPES) do
      stats.committed[t] = 0
   end
end

function event()
   local kind = pending or pick()
   pending = kind -- kept if this attempt fails and sysbench restarts the event
   local result = PROFILES[kind](rand(1, S.tables), rand(1, S.scale))
   pending = nil
   if result == "rollback" then
      stats.rollbacks = stats.rollbacks + 1
   else
      stats.committed[kind] = stats.committed[kind] + 1
   end
end

-- A deadlock, lock wait timeout or serialization failure (the drivers' ignorable errors:
-- MySQL 1213, 1020, 1205; PostgreSQL 40P01, 40001, 23505): roll back, count it, and let
-- sysbench run the event again, which retries the same transaction type.
function sysbench.hooks.before_restart_event(err)
   local key = pg and err.sql_state or tostring(err.sql_errno)
   stats.retries[key] = (stats.retries[key] or 0) + 1
   con:query("ROLLBACK")
end

local function json(t)
   local parts = {}
   for k, v in pairs(t) do
      local value
      if type(v) == "table" then
         value = json(v)
      elseif type(v) == "string" then
         value = string.format("%q", v)
      else
         value = tostring(v)
      end
      parts[#parts + 1] = string.format("%q:%s", k, value)
   end
   table.sort(parts)
   return "{" .. table.concat(parts, ",") .. "}"
end

function thread_done()
   io.stdout:write("tpcc-thread " .. json({thread = sysbench.tid, committed = stats.committed,
                                           rollbacks = stats.rollbacks, retries = stats.retries}) .. "\n")
   io.stdout:flush()
   con:disconnect()
end

-- ---------------------------------------------------------------- check

-- The consistency conditions of clause 3.3.2, per warehouse: {number, column names, query};
-- each query returns the rows that break the condition (district or customer, and the
-- values compared). Conditions 10
-- and 12 sum a customer's delivered order lines, which a purge deletes: skipped then.
-- Condition 11 holds only for the initial database and is not checked.
local function conditions(set, w)
   local n = set
   local c = {
      {1, {"w_ytd", "sum_d_ytd"}, string.format([[SELECT w_ytd, (SELECT SUM(d_ytd) FROM district%d WHERE d_w_id = w_id)
 FROM warehouse%d WHERE w_id = %d AND w_ytd <> (SELECT SUM(d_ytd) FROM district%d WHERE d_w_id = w_id)]], n, n, w, n)},
      {2, {"d_id", "d_next_o_id_minus_1", "max_o_id", "max_no_o_id"}, string.format([[SELECT d_id, d_next_o_id - 1, mo, mno FROM district%d,
 (SELECT o_d_id, MAX(o_id) AS mo FROM orders%d WHERE o_w_id = %d GROUP BY o_d_id) o
 LEFT JOIN (SELECT no_d_id, MAX(no_o_id) AS mno FROM new_order%d WHERE no_w_id = %d GROUP BY no_d_id) nw
 ON nw.no_d_id = o.o_d_id
 WHERE d_w_id = %d AND o.o_d_id = d_id AND (d_next_o_id - 1 <> mo OR (mno IS NOT NULL AND mno <> mo))]],
         n, n, w, n, w, w)},
      {3, {"d_id", "no_span", "no_count"}, string.format([[SELECT no_d_id, MAX(no_o_id) - MIN(no_o_id) + 1, COUNT(*) FROM new_order%d
 WHERE no_w_id = %d GROUP BY no_d_id HAVING MAX(no_o_id) - MIN(no_o_id) + 1 <> COUNT(*)]], n, w)},
      {4, {"d_id", "sum_o_ol_cnt", "order_lines"}, string.format([[SELECT o.o_d_id, o.s, l.c FROM
 (SELECT o_d_id, SUM(o_ol_cnt) AS s FROM orders%d WHERE o_w_id = %d GROUP BY o_d_id) o
 LEFT JOIN (SELECT ol_d_id, COUNT(*) AS c FROM order_line%d WHERE ol_w_id = %d GROUP BY ol_d_id) l
 ON l.ol_d_id = o.o_d_id WHERE l.c IS NULL OR o.s <> l.c]], n, w, n, w)},
      {5, {"d_id", "o_id", "o_carrier_id", "no_o_id"}, string.format([[SELECT o_d_id, o_id, o_carrier_id, no_o_id FROM orders%d
 LEFT JOIN new_order%d ON no_w_id = o_w_id AND no_d_id = o_d_id AND no_o_id = o_id
 WHERE o_w_id = %d AND ((o_carrier_id IS NULL) <> (no_o_id IS NOT NULL)) LIMIT 10]], n, n, w)},
      {6, {"d_id", "o_id", "o_ol_cnt", "order_lines"}, string.format([[SELECT o_d_id, o_id, o_ol_cnt, COUNT(ol_number) FROM orders%d
 LEFT JOIN order_line%d ON ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id
 WHERE o_w_id = %d GROUP BY o_d_id, o_id, o_ol_cnt HAVING o_ol_cnt <> COUNT(ol_number) LIMIT 10]], n, n, w)},
      {7, {"d_id", "o_id", "ol_number"}, string.format([[SELECT ol_d_id, ol_o_id, ol_number FROM order_line%d
 JOIN orders%d ON o_w_id = ol_w_id AND o_d_id = ol_d_id AND o_id = ol_o_id
 WHERE ol_w_id = %d AND ((ol_delivery_d IS NULL) <> (o_carrier_id IS NULL)) LIMIT 10]], n, n, w)},
      {8, {"w_ytd", "sum_h_amount"}, string.format([[SELECT w_ytd, (SELECT SUM(h_amount) FROM history%d WHERE h_w_id = w_id)
 FROM warehouse%d WHERE w_id = %d AND w_ytd <> (SELECT SUM(h_amount) FROM history%d WHERE h_w_id = w_id)]], n, n, w, n)},
      {9, {"d_id", "d_ytd", "sum_h_amount"}, string.format([[SELECT d_id, d_ytd, h FROM district%d
 LEFT JOIN (SELECT h_d_id, SUM(h_amount) AS h FROM history%d WHERE h_w_id = %d GROUP BY h_d_id) x ON h_d_id = d_id
 WHERE d_w_id = %d AND (h IS NULL OR d_ytd <> h)]], n, n, w, w)},
   }
   if S.purge == 0 then
      local delivered = string.format([[SELECT ol_d_id AS dd, o_c_id AS cc, SUM(ol_amount) AS amt FROM order_line%d
 JOIN orders%d ON o_w_id = ol_w_id AND o_d_id = ol_d_id AND o_id = ol_o_id
 WHERE ol_w_id = %d AND ol_delivery_d IS NOT NULL GROUP BY ol_d_id, o_c_id]], n, n, w)
      local paid = string.format([[SELECT h_c_d_id AS hd, h_c_id AS hc, SUM(h_amount) AS hamt FROM history%d
 WHERE h_c_w_id = %d GROUP BY h_c_d_id, h_c_id]], n, w)
      c[#c + 1] = {10, {"d_id", "c_id", "c_balance", "delivered_minus_paid"}, string.format([[SELECT c_d_id, c_id, c_balance, COALESCE(amt, 0) - COALESCE(hamt, 0)
 FROM customer%d LEFT JOIN (%s) dl ON dd = c_d_id AND cc = c_id LEFT JOIN (%s) py ON hd = c_d_id AND hc = c_id
 WHERE c_w_id = %d AND c_balance <> COALESCE(amt, 0) - COALESCE(hamt, 0) LIMIT 10]], n, delivered, paid, w)}
      c[#c + 1] = {12, {"d_id", "c_id", "c_balance_plus_ytd_payment", "delivered"}, string.format([[SELECT c_d_id, c_id, c_balance + c_ytd_payment, COALESCE(amt, 0)
 FROM customer%d LEFT JOIN (%s) dl ON dd = c_d_id AND cc = c_id
 WHERE c_w_id = %d AND c_balance + c_ytd_payment <> COALESCE(amt, 0) LIMIT 10]], n, delivered, w)}
   end
   return c
end

local function check_body()
   connect()
   local tid, nthreads = sysbench.tid, sysbench.opt.threads
   local unit, warehouses, checked, failures = 0, 0, 0, 0
   for set = 1, S.tables do
      for w = 1, S.scale do
         if unit % nthreads == tid then
            warehouses = warehouses + 1
            for _, cond in ipairs(conditions(set, w)) do
               checked = checked + 1
               local bad = rows(cond[3])
               if #bad > 0 then
                  failures = failures + 1
                  local sample = {}
                  for i, r in ipairs(bad) do
                     local cells = {}
                     for j, name in ipairs(cond[2]) do
                        cells[j] = name .. "=" .. tostring(r[j] or "NULL")
                     end
                     sample[i] = table.concat(cells, " ")
                  end
                  io.stdout:write("tpcc-check " .. json({set = set, warehouse = w, condition = cond[1],
                                                         rows = #bad, sample = table.concat(sample, "; ")}) .. "\n")
               end
            end
         end
         unit = unit + 1
      end
   end
   io.stdout:write("tpcc-check-done " .. json({thread = tid, warehouses = warehouses, checks = checked,
                                               failures = failures, purge = S.purge}) .. "\n")
   io.stdout:flush()
end

sysbench.cmdline.commands = {
   prepare = {or_exit(prepare_body, "prepare"), sysbench.cmdline.PARALLEL_COMMAND},
   check = {or_exit(check_body, "check"), sysbench.cmdline.PARALLEL_COMMAND},
   cleanup = {cmd_cleanup},
}
