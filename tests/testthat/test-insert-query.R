# insert_benchmark.R and query_timing.R: medians per configuration, relative
# to the baseline (= 1.0), and the rate shortfall mark.

phase_rows <- function(engine, rep, phase, inserts_s, queries_s, target = NA) {
  data.table(engine = engine, rep = rep, phase = phase, target_inserts_s = target,
             inserts_s = inserts_s, queries_s = queries_s, cpu_us_per_op = 100,
             kb_read_per_op = 1, kb_written_per_op = 2, db_mb = 50)
}

test_that("insert figures are medians relative to the baseline engine", {
  phases <- rbind(phase_rows("innodb", 1:3, "qr", c(100, 98, 99), c(1000, 1100, 900), 100),
                  phase_rows("postgresql", 1:3, "qr", c(80, 70, 90), c(2000, 2200, 1800), 100),
                  phase_rows("innodb", 1, "load", 5000, 0),
                  phase_rows("postgresql", 1, "load", 10000, 0))
  t <- insert_table(phases, c("engine"), list(engine = "innodb"))
  qr <- t[phase == "qr" & metric == "queries_s"]
  expect_equal(qr[engine == "innodb"]$relative, 1)
  expect_equal(qr[engine == "postgresql"]$relative, 2)
  expect_true(qr[engine == "innodb"]$baseline)
  ins <- t[phase == "qr" & metric == "inserts_s"]
  expect_equal(ins$short_of_target, c(FALSE, TRUE))  # 99 >= 95, 80 < 95
  expect_equal(t[phase == "load" & metric == "inserts_s" & engine == "postgresql"]$relative, 2)
  expect_equal(unique(t$phase), c("load", "qr"))
  expect_equal(t[phase == "load" & metric == "queries_s"]$relative, c(NA_real_, NA_real_))
  # by the study's one method: the run-to-run noise of qr's queries_s pooled over both engines (df 4)
  expect_equal(qr[engine == "postgresql"]$verdict, "higher")
  expect_match(qr[engine == "postgresql"]$test, "t on log medians.*df 4")
  expect_true(qr[engine == "postgresql"]$ratio_low > 1.5 && qr[engine == "postgresql"]$ratio_high < 2.7)
  expect_true(is.na(qr[engine == "innodb"]$verdict))  # the baseline
  # one repetition of each engine's load: nothing to tell noise by, so no verdict
  load <- t[phase == "load" & metric == "inserts_s" & engine == "postgresql"]
  expect_true(is.na(load$ratio_low) && is.na(load$verdict))
})

test_that("the server's own CPU and IO and the context switches per operation are compared too, NA in older tables", {
  phases <- rbind(phase_rows("innodb", 1:2, "load", 5000, 0),
                  phase_rows("postgresql", 1:2, "load", 10000, 0))
  old <- insert_table(phases, c("engine"), list(engine = "innodb"))
  expect_true(all(is.na(old[metric %in% c("server_cpu_us_per_op", "cs_per_op")]$value)))
  expect_equal(nrow(old[metric == "cs_per_op"]), 2)
  phases[, `:=`(server_cpu_us_per_op = ifelse(engine == "innodb", 10, 30),
                server_kb_read_per_op = 0, server_kb_written_per_op = 0.5, cs_per_op = ifelse(engine == "innodb", 4, 2))]
  t <- insert_table(phases, c("engine"), list(engine = "innodb"))
  cpu <- t[metric == "server_cpu_us_per_op"]
  expect_equal(cpu$value, c(10, 30))
  expect_equal(cpu[engine == "postgresql"]$relative, 3)
  expect_equal(t[metric == "server_kb_written_per_op"]$value, c(0.5, 0.5))
  expect_equal(t[metric == "cs_per_op" & engine == "postgresql"]$relative, 0.5)
  expect_true(all(c("kb_written_per_insert", "server_kb_written_per_insert") %in% t$metric))
  expect_true(all(c("cpu_us_per_op", "server_cpu_us_per_op") %in% t$metric))
})

test_that("an empty phases table stops with a reason", {
  expect_error(insert_table(phase_rows("innodb", 1, "qr", 1, 1)[0], "engine"), "no rows")
})

test_that("query figures are medians over executions, relative to the baseline", {
  ex <- rbind(
    data.table(cache = "warm", rep = 1L, execution = 1:3, name = "ms", value = c(10, 12, 11)),
    data.table(cache = "cold", rep = 1L, execution = 1:3, name = "ms", value = c(50, 55, 60)),
    data.table(cache = "cold", rep = 1L, execution = 1:3, name = "Innodb_buffer_pool_reads",
               value = c(500, 500, 500)),
    data.table(cache = "warm", rep = 1L, execution = 1:3, name = "Innodb_buffer_pool_reads",
               value = 0))
  t <- query_table(ex, "cache", list(cache = "warm"))
  expect_equal(t[name == "ms" & cache == "cold"]$value, 55)
  expect_equal(t[name == "ms" & cache == "cold"]$relative, 5)
  expect_equal(t[name == "ms"]$configuration, c("cache=cold", "cache=warm"))
  expect_true(is.na(t[name == "Innodb_buffer_pool_reads" & cache == "cold"]$relative))  # baseline 0
  expect_equal(t$name[1], "ms")
  expect_true(is.na(t[name == "ms" & cache == "cold"]$verdict))  # 3 executions: too few to bootstrap
})

test_that("one repetition of enough executions: a bootstrap of the executions gives the verdict", {
  ex <- rbind(data.table(cache = "warm", rep = 1L, execution = 1:6, name = "ms", value = c(10, 12, 11, 13, 9, 11)),
              data.table(cache = "cold", rep = 1L, execution = 1:6, name = "ms", value = c(50, 55, 60, 52, 58, 54)),
              data.table(cache = "hot", rep = 1L, execution = 1:6, name = "ms", value = c(9, 13, 10, 12, 11, 12)))
  t <- query_table(ex, "cache", list(cache = "warm"))
  expect_equal(t[cache == "cold"]$verdict, "higher")
  expect_equal(t[cache == "hot"]$verdict, "within noise")
  expect_match(t[cache == "cold"]$test, "bootstrap of the executions")
  # two repetitions: their medians and the noise pooled over the configurations instead
  two <- rbind(ex, copy(ex)[, `:=`(rep = 2L, value = value * 1.02)])
  t2 <- query_table(two, "cache", list(cache = "warm"))
  expect_equal(t2[cache == "cold"]$value, median(c(54.5, 54.5 * 1.02)))
  expect_match(t2[cache == "cold"]$test, "t on log medians")
})

test_that("each group's configurations go against that group's own baseline", {
  ex <- CJ(engine = c("innodb", "postgresql"), cache = c("cold", "warm"), rep = 1L, execution = 1:6)
  ex[, `:=`(name = "ms", value = execution + ifelse(cache == "cold", ifelse(engine == "innodb", 100, 300), 10))]
  t <- query_table(ex, c("engine", "cache"), list(cache = "warm"))
  expect_equal(t[cache == "cold"]$verdict, c("higher", "higher"))
  expect_equal(t[cache == "cold"]$relative, c(103.5 / 13.5, 303.5 / 13.5))
  expect_true(all(t[cache == "cold"]$ratio_low > 5))
})

test_that("a baseline naming one axis compares within the other axes", {
  ex <- data.table(engine = rep(c("innodb", "postgresql"), each = 4),
                   plan = rep(c("default", "nested"), 4), rep = 1L, execution = rep(1:2, each = 2),
                   name = "ms", value = c(10, 20, 10, 20, 100, 50, 100, 50))
  t <- query_table(ex, c("engine", "plan"), list(plan = "default"))
  expect_equal(t[engine == "innodb" & plan == "nested"]$relative, 2)
  expect_equal(t[engine == "postgresql" & plan == "nested"]$relative, 0.5)
  expect_equal(t[plan == "default"]$relative, c(1, 1))
})

test_that("the plot names each metric's row in lines that fit it", {
  phases <- rbind(phase_rows("innodb", 1, "load", 5000, 0), phase_rows("postgresql", 1, "load", 10000, 0))
  p <- insert_plot(insert_table(phases, c("engine"), list(engine = "innodb")))
  strips <- p$facet$params$labeller(data.frame(metric = c("server_kb_written_per_insert", "db_mb")))
  expect_equal(strips[[1]], c("server kb\nwritten per\ninsert", "db mb"))
})

# Plans: one fingerprint per repetition (plans.csv.gz), compared with the baseline's.
plan_rows <- function(plan, fingerprint, rep = 1L, engine = "innodb") {
  data.table(engine = engine, plan = plan, rep = rep, query = "join", statement = "ANALYZE FORMAT=JSON",
             fingerprint = fingerprint, seconds = 0.1, file = sprintf("runs/plan~%s/rep~%d/p.json", plan, rep))
}

test_that("a configuration that ran the baseline's plan says so, and its verdict is no optimizer effect", {
  ex <- CJ(engine = "innodb", plan = c("default", "nested", "hash"), rep = 1L, execution = 1:6)
  ex[, `:=`(name = "ms", value = execution + c(default = 10, nested = 100, hash = 1)[plan])]
  plans <- rbind(plan_rows("default", "aaaa11112222"), plan_rows("nested", "aaaa11112222"),
                 plan_rows("hash", "bbbb33334444"))
  t <- query_table(ex, c("engine", "plan"), list(plan = "default"), plans = plans)
  expect_equal(t[plan == "default"]$plan_vs_baseline, "baseline")
  expect_equal(t[plan == "nested"]$plan_vs_baseline, "same plan")
  expect_equal(t[plan == "nested"]$verdict, "higher (same plan: not an optimizer effect)")
  expect_equal(t[plan == "hash"]$plan_vs_baseline, "other plan")
  expect_equal(t[plan == "hash"]$verdict, "lower")
  expect_equal(t[plan == "hash"]$plan_fingerprint, "bbbb33334444")
  expect_equal(t[plan == "nested"]$plan_files, "runs/plan~nested/rep~1/p.json")
  expect_true(is.na(t[plan == "default"]$verdict))
})

test_that("plans that vary between repetitions, a missing plan and no plans at all claim no same plan", {
  ex <- CJ(engine = "innodb", plan = c("default", "nested", "hash"), rep = 1:2, execution = 1:3)
  ex[, `:=`(name = "ms", value = execution + c(default = 10, nested = 100, hash = 1)[plan])]
  plans <- rbind(plan_rows("default", "aaaa11112222", 1:2), plan_rows("nested", "aaaa11112222", 1L),
                 plan_rows("nested", "cccc55556666", 2L))  # hash: no plan kept
  t <- query_table(ex, c("engine", "plan"), list(plan = "default"), plans = plans)
  expect_equal(t[plan == "nested"]$plan_vs_baseline, "plans vary")
  expect_equal(t[plan == "nested"]$plan_fingerprint, "aaaa11112222 / cccc55556666")
  expect_false(any(grepl("same plan", t$verdict)))
  expect_true(is.na(t[plan == "hash"]$plan_vs_baseline) && is.na(t[plan == "hash"]$plan_fingerprint))
  none <- query_table(ex, c("engine", "plan"), list(plan = "default"))
  expect_true(all(is.na(none$plan_fingerprint)) && all(is.na(none$plan_vs_baseline)))
  expect_equal(none$verdict, t$verdict)
  # the baseline's own plan missing: nothing to compare with
  t <- query_table(ex, c("engine", "plan"), list(plan = "default"), plans = plans[plan != "default"])
  expect_true(all(is.na(t[plan != "default"]$plan_vs_baseline)))
})

test_that("one configuration: its plan, as its own baseline; each group has its own baseline plan", {
  ex <- data.table(engine = "innodb", plan = "default", rep = 1L, execution = 1:3, name = "ms", value = 1:3)
  t <- query_table(ex, c("engine", "plan"), plans = plan_rows("default", "aaaa11112222"))
  expect_equal(t$plan_fingerprint, "aaaa11112222")
  expect_equal(t$plan_vs_baseline, "baseline")
  ex <- CJ(engine = c("innodb", "postgresql"), plan = c("default", "nested"), rep = 1L, execution = 1:3)
  ex[, `:=`(name = "ms", value = execution)]
  plans <- rbind(plan_rows("default", "aaaa11112222"), plan_rows("nested", "aaaa11112222"),
                 plan_rows("default", "dddd77778888", engine = "postgresql"),
                 plan_rows("nested", "eeee99990000", engine = "postgresql"))
  t <- query_table(ex, c("engine", "plan"), list(plan = "default"), plans = plans)
  expect_equal(t[plan == "nested"]$plan_vs_baseline, c("same plan", "other plan"))
})

test_that("the plans table is read with its fingerprints as text", {
  path <- tempfile(fileext = ".csv.gz")
  con <- gzfile(path, "w")
  writeLines(c("engine,threads,rep,host,query,statement,fingerprint,seconds,file",
               "innodb,1,1,h,join,EXPLAIN FORMAT=JSON,012345678901,0.25,runs/a.json",
               "innodb,1,2,h,join,EXPLAIN FORMAT=JSON,,0.25,runs/b.json"), con)
  close(con)
  p <- read_plans(path, c("engine", "threads"))
  expect_identical(p$fingerprint, c("012345678901", NA))
  expect_identical(p$threads, c(1L, 1L))
  expect_equal(p$seconds, c(0.25, 0.25))
  expect_null(read_plans(file.path(tempdir(), "nowhere.csv.gz"), "engine"))
  expect_error(read_plans(path, c("engine", "cache")), "missing column\\(s\\) cache")
})
