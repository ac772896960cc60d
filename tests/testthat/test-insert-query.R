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
