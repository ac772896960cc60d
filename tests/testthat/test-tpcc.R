
# Two tpcc cells (innodb, postgresql) of two repetitions and one sysbench cell,
# as the aggregate step's summary has them; postgresql's rep 2 failed its check.
tpcc_summary <- function() {
  data.table(
    engine = c("innodb", "innodb", "postgresql", "postgresql", "innodb"),
    workload = c("tpcc", "tpcc", "tpcc", "tpcc", "oltp"),
    rep = c(1L, 2L, 1L, 2L, 1L),
    tool = c("tpcc", "tpcc", "tpcc", "tpcc", "sysbench"), kind = "database", per_second = 1L,
    tps = c(100, 120, 200, 220, 500), tpmc = c(2700, 3300, 5400, 6000, NA),
    new_order = c(450, 550, 900, 1000, NA), payment = c(430, 430, 860, 860, NA),
    order_status = c(40, 40, 80, 80, NA), delivery = c(40, 40, 80, 80, NA),
    stock_level = c(40, 40, 80, 80, NA), rollbacks = c(5, 5, 10, 10, NA),
    retries = c(1, 2, 30, 40, NA), check = c("ok", "ok", "ok", "failed", NA),
    check_failures = c(0, 0, 0, 2, NA))
}

test_that("tpcc_table gives medians, the mix, and a failed check per cell", {
  table <- tpcc_table(tpcc_summary(), c("engine", "workload"))
  expect_equal(table$engine, c("innodb", "postgresql"))
  expect_equal(table$tpmc, c(3000, 5700))
  expect_equal(table$reps, c(2L, 2L))
  expect_equal(table$new_order_pct, round(100 * c(1000, 1900) / c(2110, 4120), 1))
  expect_equal(table$retries, c(3, 70))
  expect_equal(table$check, c("ok", "FAILED (1 of 2 reps)"))
  expect_equal(table$check_failures, c(0, 2))
})

test_that("a check that did not run is said so, not passed", {
  expect_equal(check_verdict(c(NA_character_, NA_character_)), "not run")
  expect_equal(check_verdict(c("ok", NA)), "ok")
})

test_that("the rule announces a failed check at the top of the md", {
  dir <- tempfile("tpcc")
  dir.create(dir)
  summary <- tpcc_summary()
  for (col in setdiff(SUMMARY_COLUMNS, names(summary))) set(summary, j = col, value = NA_real_)
  path <- file.path(dir, "summary.csv")
  fwrite(summary, path)
  output <- list(tpcc_csv = file.path(dir, "tpcc.csv"), tpcc_md = file.path(dir, "tpcc.md"))
  rule_tpcc_table(list(summary = path), output, list(axes = c("engine", "workload")))
  md <- readLines(output$tpcc_md)
  expect_match(md[1], "consistency check FAILED in 1 cell", fixed = TRUE)
  expect_equal(fread(output$tpcc_csv)$check, c("ok", "FAILED (1 of 2 reps)"))
})
