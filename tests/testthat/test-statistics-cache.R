# Rule statistics' cache of markdown lines (workflow/R/statistics_cache.R, statistics_md_memo()): a table's
# row that equals a row of the last run's table, in every column, takes its line from there; every other row
# is formatted. The tables are the lines md_lines() writes without the cache.

memo_with <- function(previous) {
  memo <- new.env()
  memo$previous <- previous
  memo$now <- list()
  memo
}

test_that("equal rows reuse their line, changed and new rows are formatted, NA matches NA", {
  before <- data.table(engine = c("innodb", "myrocks", NA), threads = c(1L, 2L, 4L), tps = c(1234.5, NA, 0.5))
  now <- data.table(engine = c(NA, "innodb", "myrocks", "innodb"), threads = c(4L, 1L, 2L, 8L),
                    tps = c(0.5, 1234.5, 7, 3))
  # lines the formatting would not write: a line read back shows as itself
  memo <- memo_with(list(t = list(rows = before, lines = c("L1", "L2", "L3"))))
  body <- memo_body_lines(now, memo, "t")
  expect_identical(body[1:2], c("L3", "L1"))  # equal rows, in the new order (one with NA)
  expect_identical(body[3:4], md_body_lines(now[3:4]))  # a changed value (NA -> 7), a new row
  expect_identical(memo$now$t$lines, body)
  real <- memo_with(list(t = list(rows = before, lines = md_body_lines(before))))
  expect_identical(md_lines(now, memo_body_lines(now, real, "t")), md_lines(now))
})

test_that("a table whose columns or their types changed, or without a last run, is formatted whole", {
  rows <- data.table(threads = 1:2, tps = c(10, 20))
  fake <- list(rows = rows, lines = c("A", "B"))
  for (previous in list(list(), list(t = fake),
                        list(t = list(rows = data.table(threads = c(1, 2), tps = c(10, 20)), lines = c("A", "B"))),
                        list(t = list(rows = setnames(copy(rows), c("threads", "iops")), lines = c("A", "B"))))) {
    renamed <- if (length(previous)) identical(names(previous$t$rows), names(rows)) else FALSE
    same_types <- renamed && is.integer(previous$t$rows$threads)
    body <- memo_body_lines(rows, memo_with(previous), "t")
    expect_identical(body, if (same_types) c("A", "B") else md_body_lines(rows))
  }
  expect_identical(memo_body_lines(rows, NULL, "t"), md_body_lines(rows))
})

test_that("sections of a table get the lines of one split per section, with or without lines made before", {
  dt <- data.table(engine = c("a", "b", "a", NA), threads = c(1L, 1L, 2L, 1L), tps = c(1, 2, 3, 4))
  by_section <- function(d) {  # md_table_lines() as it was: a table per section from split()
    groups <- unique(d[, "engine"])
    parts <- split(d, by = "engine", keep.by = FALSE, sorted = FALSE)
    unlist(lapply(seq_along(parts), function(i) {
      c(paste("###", configuration_label(groups, "engine")[i]), "", md_lines(parts[[i]]), "")
    }), use.names = FALSE)
  }
  expect_identical(md_table_lines(dt, "engine"), by_section(dt))
  expect_identical(md_table_lines(dt, "engine", md_body_lines(dt[, -"engine"])), by_section(dt))
  expect_identical(names(dt), c("engine", "threads", "tps"))  # the caller's table is left as it was
})

test_that("a cell's summary rows are as before only when every row is there, once, every value equal", {
  cells <- data.table(.cell = 1:4, engine = c("a", "a", "b", "c"), threads = c(1L, 2L, 1L, 1L))
  old <- data.table(engine = c("a", "a", "a", "b", "c"), threads = c(1L, 1L, 2L, 1L, 1L), rep = c(1L, 2L, 1L, 1L, 1L),
                    tps = c(10, 11, 20, NA, 5))
  axes <- c("engine", "threads")
  expect_identical(summary_as_before(old, copy(old)[c(5, 1, 3, 2, 4)], cells, axes), rep(TRUE, 4))  # any order
  changed <- copy(old)[3, tps := 20 + 1e-12]
  expect_identical(summary_as_before(old, changed, cells, axes), c(TRUE, FALSE, TRUE, TRUE))
  twice <- copy(old)[c(1, 1, 3, 4, 5)]  # cell 1: rep 1 twice, rep 2 gone (as many rows as before)
  expect_identical(summary_as_before(old, twice, cells, axes), c(FALSE, TRUE, TRUE, TRUE))
  fewer <- old[-2]
  expect_identical(summary_as_before(old, fewer, cells, axes), c(FALSE, TRUE, TRUE, TRUE))
  expect_identical(summary_as_before(fewer, old, cells, axes), c(FALSE, TRUE, TRUE, TRUE))
  retyped <- copy(old)[, tps := as.integer(round(tps))]
  expect_identical(summary_as_before(old, retyped, cells, axes), rep(FALSE, 4))
  expect_identical(summary_as_before(NULL, old, cells, axes), rep(FALSE, 4))
})

test_that("the markdown cache is written in R's native binary format and read back whole", {
  dir <- tempfile("memo")
  on.exit(unlink(dir, recursive = TRUE))
  memo <- memo_with(list())
  memo$path <- file.path(dir, "cache", STATISTICS_MD_FILE)
  memo$header <- "header"
  rows <- data.table(engine = c("innodb", NA), tps = c(1234.5, NA))
  memo_body_lines(rows, memo, "t")
  save_statistics_md_memo(memo)
  expect_identical(readBin(memo$path, "raw", 2L), charToRaw("B\n"))  # not XDR ("X\n"): no byte swapping
  back <- readRDS(memo$path)
  expect_identical(back$header, "header")
  expect_identical(back$tables$t$lines, md_body_lines(rows))
  expect_equal(back$tables$t$rows, rows)  # not identical: a data.table read back has no over-allocation
})
