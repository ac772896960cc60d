
db_tables_output <- function(dir) {
  names <- c("engine_memory_csv", "engine_memory_md", "binlog_csv", "binlog_md",
             "efficiency_csv", "efficiency_md")
  files <- c("engine_memory.csv", "engine_memory.md", "binlog.csv", "binlog.md",
             "efficiency.csv", "efficiency.md")
  as.list(stats::setNames(file.path(dir, files), names))
}

# Runs rule_db_tables() on a study; returns the output paths.
run_db_tables <- function(sweep, baseline = list()) {
  dir <- tempfile("dbtables")
  output <- db_tables_output(dir)
  rule_db_tables(write_db_study(sweep, baseline), output, list(axes = sweep$axes),
                 log = file.path(dir, "db_tables.log"))
  output
}

# The rule run once on make_db_sweep(), for the three tests that read its tables (the statistics rule
# under it is most of a test's time). The tests only read its files.
default_tables <- local({
  output <- NULL
  function() {
    if (is.null(output)) output <<- run_db_tables(make_db_sweep())
    output
  }
})

# The database repetitions of a study, as rule_db_tables() sees them.
db_summary <- function(sweep) database_rows(sweep$summary)

test_that("memory values sort by size, engines and binlog in reading order", {
  expect_equal(axis_levels(c("1G", "64M", "256M"), "memory"), c("64M", "256M", "1G"))
  expect_equal(axis_levels(c("2G", "512k", "1.5G", "2GiB", "768M", "64M"), "memory"),
               c("512k", "64M", "768M", "1.5G", "2G", "2GiB"))
  expect_equal(size_bytes(c("64M", "1G", "4k", "1048576", "2GiB", "lots")),
               c(64 * 2^20, 2^30, 4096, 2^20, 2 * 2^30, NA))
  expect_equal(axis_levels(c("postgresql", "myrocks", "innodb"), "engine"),
               c("innodb", "myrocks", "postgresql"))
  expect_equal(axis_levels(c("sync10000", "sync1", "off", "sync1000", "sync0"), "binlog"),
               c("off", "sync0", "sync1", "sync1000", "sync10000"))
  expect_equal(axis_levels(c("v10", "v9", "v9.5"), "version"), c("v9", "v9.5", "v10"))
  expect_equal(axis_levels(c(16L, 4L, 1L, NA), "threads"), c("1", "4", "16"))
  dt <- data.table(memory = c("1G", "64M", NA, "256M"), x = 1:4)
  order_by_axes(dt, "memory")
  expect_equal(dt$x, c(2L, 4L, 1L, 3L))
})

test_that("a study's declared order of an axis's values comes first", {
  saved <- AXIS_ORDER
  on.exit(AXIS_ORDER <<- saved)
  expect_equal(axis_levels(c("near", "far", "lan"), "network"), c("far", "lan", "near"))  # by name
  declare_axis_order(list(network = c("lan", "near", "far"), memory = c("1G", "64M")))
  expect_equal(axis_levels(c("near", "far", "lan"), "network"), c("lan", "near", "far"))
  expect_equal(axis_levels(c("64M", "1G"), "memory"), c("1G", "64M"))  # as declared, not by size
  expect_equal(axis_levels(c("postgresql", "innodb"), "engine"), c("innodb", "postgresql"))  # untouched
  declare_axis_order(NULL)  # a rule without the param
  expect_equal(axis_levels(c("near", "lan"), "network"), c("lan", "near"))
})

test_that("the baseline is params$baseline's value, else the first in order", {
  expect_equal(baseline_value(c("myrocks", "postgresql"), "engine"), "myrocks")
  expect_equal(baseline_value(c("postgresql", "innodb"), "engine", list()), "innodb")
  expect_equal(baseline_value(c("innodb", "myrocks"), "engine", list(engine = "myrocks")),
               "myrocks")
  expect_equal(baseline_value(c("RC", "RR"), "isolation", list(engine = "innodb")), "RR")
  expect_equal(baseline_value(c("b", "a"), "mine", c(mine = "b")), "b")
  expect_error(baseline_value(c("innodb", "myrocks"), "engine", list(engine = "rocks")),
               "params$baseline: engine = rocks is not in the data (innodb, myrocks)",
               fixed = TRUE)
})

# The comparisons row of a pair: ratio and verdict, as comparisons.csv has it.
pair <- function(comparisons, axis, value, ...) {
  keys <- list(...)
  hit <- comparisons$axis == axis & comparisons$axis_value == value & comparisons$metric == "tps"
  for (k in names(keys)) hit <- hit & comparisons[[k]] == keys[[k]]
  comparisons[hit]
}

test_that("engine x memory: median tps per engine, ratio and verdict of the statistics rule", {
  sweep <- make_db_sweep()
  stats <- db_stats(sweep)
  tab <- engine_memory_table(stats, sweep$axes)
  expect_named(tab, c("memory", "innodb", "myrocks", "myrocks/innodb", "myrocks/innodb verdict"))
  expect_equal(tab$memory, c("64M", "256M", "1G"))
  expect_equal(tab$innodb, c(200, 500, 800), tolerance = 0.05)
  expect_equal(tab$myrocks, c(450, 500, 550), tolerance = 0.05)
  expect_equal(tab$`myrocks/innodb`, c(2.25, 1, 0.6875), tolerance = 0.05)
  for (m in tab$memory) {
    row <- pair(stats$comparisons, "engine", "myrocks", memory = m)
    expect_equal(tab[memory == m, `myrocks/innodb`], row$ratio)
    expect_equal(tab[memory == m, `myrocks/innodb verdict`], row$verdict)
  }
  expect_equal(tab$`myrocks/innodb verdict`[c(1, 3)], c("higher", "lower"))
  expect_length(attr(tab, "group_by"), 0)

  other <- engine_memory_table(db_stats(sweep, list(engine = "myrocks")), sweep$axes)
  expect_named(other, c("memory", "innodb", "myrocks", "innodb/myrocks", "innodb/myrocks verdict"))
  expect_equal(other$`innodb/myrocks`, c(200 / 450, 1, 800 / 550), tolerance = 0.05)
})

test_that("engine x memory rows follow memory size whatever the input order", {
  sweep <- make_db_sweep(list(engine = c("myrocks", "innodb"),
                              memory = c("1G", "64M", "256M")), reps = 3L)
  tab <- engine_memory_table(db_stats(sweep), sweep$axes)
  expect_equal(tab$memory, c("64M", "256M", "1G"))
  expect_equal(names(tab)[2:3], c("innodb", "myrocks"))
  expect_equal(tab$innodb, c(200, 500, 800), tolerance = 0.05)
})

test_that("other varying axes make one section each", {
  sweep <- make_db_sweep(list(engine = c("innodb", "postgresql"),
                              memory = c("256M", "64M"), threads = c(1L, 4L),
                              workload = "tpcc"), reps = 1L, duration = 3L,
                         stall = NULL)
  tab <- engine_memory_table(db_stats(sweep), sweep$axes)
  expect_equal(attr(tab, "group_by"), "threads")
  expect_named(tab, c("threads", "memory", "innodb", "postgresql", "postgresql/innodb",
                      "postgresql/innodb verdict"))
  expect_type(tab$threads, "integer")
  expect_equal(tab$threads, c(1L, 1L, 4L, 4L))
  expect_equal(tab$memory, c("64M", "256M", "64M", "256M"))

  output <- run_db_tables(sweep)
  md <- readLines(output$engine_memory_md)
  expect_equal(grep("^### ", md, value = TRUE), c("### threads=1", "### threads=4"))
  expect_true("| memory | innodb | postgresql | postgresql/innodb | postgresql/innodb verdict |" %in% md)
  expect_match(md[1], "Same in every cell: workload = tpcc.", fixed = TRUE)
})

test_that("binlog tables: memory x binlog, and binlog | memory | ext4 | xfs", {
  sweep <- make_db_sweep(list(engine = "innodb", memory = c("1G", "64M"),
                              filesystem = c("xfs", "ext4"),
                              binlog = c("sync1", "off", "sync0")),
                         duration = 3L)
  stats <- db_stats(sweep)
  tables <- binlog_tables(stats, sweep$axes)

  by_fs <- tables$by_filesystem
  expect_named(by_fs, c("binlog", "memory", "ext4", "xfs"))
  expect_equal(by_fs$binlog, rep(c("off", "sync0", "sync1"), each = 2))
  expect_equal(by_fs$memory, rep(c("64M", "1G"), 3))
  expect_equal(by_fs$ext4, c(240, 960, 220, 880, 160, 640), tolerance = 0.08)
  expect_equal(by_fs$xfs, by_fs$ext4 * 1.1, tolerance = 0.08)

  by_mem <- tables$by_memory
  expect_equal(attr(by_mem, "group_by"), "filesystem")
  expect_named(by_mem, c("filesystem", "memory", "off", "sync0", "sync1",
                         "sync0/off", "sync0/off verdict", "sync1/off", "sync1/off verdict"))
  expect_equal(by_mem$`sync1/off`, rep(0.8 / 1.2, 4), tolerance = 0.08)
  row <- pair(stats$comparisons, "binlog", "sync1", filesystem = "xfs", memory = "1G")
  expect_equal(by_mem[filesystem == "xfs" & memory == "1G", `sync1/off`], row$ratio)

  output <- run_db_tables(sweep)
  csv <- fread(output$binlog_csv)
  expect_named(csv, c("binlog", "memory", "ext4", "xfs"))
  expect_equal(nrow(csv), 6L)
  md <- readLines(output$binlog_md)
  expect_true(all(c("## tps by memory and binlog",
                    "## tps by binlog, memory and filesystem",
                    "### filesystem=ext4", "### filesystem=xfs",
                    "| binlog | memory | ext4 | xfs |") %in% md))
})

test_that("binlog tables without memory or filesystem axes", {
  sweep <- make_db_sweep(list(binlog = c("off", "sync1")), reps = 1L,
                         duration = 3L, stall = NULL)
  tables <- binlog_tables(db_stats(sweep), sweep$axes)
  expect_named(tables$by_memory, c("off", "sync1", "sync1/off", "sync1/off verdict"))
  expect_equal(tables$by_memory$off, 0.9 * 500 * 1.2, tolerance = 0.08)
  expect_equal(tables$by_filesystem$note,
               "not applicable: this study has no filesystem axis")
  output <- run_db_tables(sweep)
  expect_named(fread(output$binlog_csv), c("off", "sync1", "sync1/off", "sync1/off verdict"))
})

test_that("tables the study cannot give say so, and are still written", {
  sweep <- make_db_sweep(list(filesystem = c("ext4", "xfs"), threads = c(1L, 4L)),
                         reps = 1L, duration = 3L, stall = NULL)
  output <- run_db_tables(sweep)
  expect_true(all(file.exists(unlist(output))))
  expect_equal(fread(output$engine_memory_csv)$note,
               "not applicable: this study has no engine axis and no memory axis")
  expect_equal(readLines(output$engine_memory_md)[1],
               "not applicable: this study has no engine axis and no memory axis")
  expect_equal(fread(output$binlog_csv)$note,
               "not applicable: this study has no binlog axis")
  expect_equal(sum(readLines(output$binlog_md) ==
                     "not applicable: this study has no binlog axis"), 2L)
  expect_equal(nrow(fread(output$efficiency_csv)), 4L)

  only_engine <- make_db_sweep(list(engine = c("innodb", "myrocks")), reps = 1L,
                               duration = 3L)
  expect_equal(engine_memory_table(db_stats(only_engine), "engine")$note,
               "not applicable: this study has no memory axis")
})

test_that("a study of storage cells only gets not-applicable tables", {
  sweep <- make_sweep(list(filesystem = "ext4", threads = c(1L, 4L)), reps = 1L,
                      duration = 3L)
  sweep$summary[, (DATABASE_SUMMARY_COLUMNS) := NA_real_]
  sweep$samples[, (DATABASE_SAMPLES_COLUMNS) := NA_real_]
  empty <- function(cols) {
    as.data.table(stats::setNames(rep(list(character()), length(cols)), cols))
  }
  sweep$system <- empty(c(sweep$axes, SYSTEM_COLUMNS))
  sweep$counters <- empty(c(sweep$axes, COUNTERS_COLUMNS))
  output <- run_db_tables(sweep)
  for (name in c("engine_memory_csv", "efficiency_csv")) {
    expect_match(fread(output[[name]])$note, "^not applicable")
  }
  expect_equal(readLines(output$efficiency_md)[1], NO_DATABASE_CELLS)
})

test_that("storage cells in a database study are left out", {
  plain <- default_tables()
  mixed_sweep <- make_db_sweep(storage = TRUE)
  expect_true(any(is.na(mixed_sweep$summary$engine)))
  mixed <- run_db_tables(mixed_sweep)
  for (name in c("engine_memory_csv", "efficiency_csv", "binlog_csv")) {
    expect_identical(readLines(mixed[[name]]), readLines(plain[[name]]), label = name)
  }
  eff <- fread(mixed$efficiency_csv)
  expect_false(anyNA(eff$engine))
  expect_equal(nrow(eff), 6L)
  log <- readLines(file.path(dirname(mixed$efficiency_csv), "db_tables.log"))
  expect_match(log[1], "12 database repetitions (2 rows of other tools left out)",
               fixed = TRUE)
})

test_that("the efficiency table has one row per cell, medians over reps", {
  sweep <- make_db_sweep()
  eff <- efficiency_table(db_summary(sweep), sweep$axes)
  # no cell on a device class: no class_util_pct column
  expect_named(eff, c(sweep$axes, "reps", setdiff(EFFICIENCY_COLUMNS, "class_util_pct")))
  on_class <- db_summary(sweep)[, class_util_pct := ifelse(engine == "innodb", 90 + 10 * rep, NA_real_)]
  classed <- efficiency_table(on_class, sweep$axes)
  expect_equal(classed$class_util_pct, c(105, 105, 105, NA, NA, NA))  # median of 100 and 110 (reps 1, 2)
  expect_equal(nrow(eff), 6L)
  expect_equal(eff$engine, rep(c("innodb", "myrocks"), each = 3))
  expect_equal(eff$memory, rep(c("64M", "256M", "1G"), 2))
  expect_equal(eff$reps, rep(2L, 6))
  expect_equal(eff$tps, c(200, 500, 800, 450, 500, 550))
  expect_equal(eff[engine == "innodb", kb_read_per_txn], c(160, 40, 10))
  expect_equal(eff[engine == "innodb", hit_ratio], c(0.92, 0.98, 0.995))
  expect_equal(eff$memory_limit_mb, rep(c(576, 768, 1536), 2))

  output <- default_tables()  # sweep's tables
  md <- readLines(output$efficiency_md)
  expect_match(md[1], "tps: transactions/s", fixed = TRUE)
  expect_true("| innodb | 64M | ext4 | 4 | 2 | 200 | 45.5 | 0.920 | 160 | 34.0 | NA | NA | 900 | NA | NA | NA | NA | 120 | 131 | 576 |"
              %in% md)
  expect_true(any(grepl("host dbhost", md)))
})

test_that("the rule writes every table and logs what it did", {
  output <- default_tables()
  expect_true(all(file.exists(unlist(output))))
  csv <- fread(output$engine_memory_csv)
  expect_named(csv, c("memory", "innodb", "myrocks", "myrocks/innodb", "myrocks/innodb verdict"))
  expect_equal(csv$memory, c("64M", "256M", "1G"))
  md <- readLines(output$engine_memory_md)
  expect_match(md[1], "Median per-second tps (transactions/s) of the steady-state windows",
               fixed = TRUE)
  expect_match(md[1], "Baseline engine: innodb.", fixed = TRUE)
  expect_true("| memory | innodb | myrocks | myrocks/innodb | myrocks/innodb verdict |" %in% md)
  log <- readLines(file.path(dirname(output$engine_memory_csv), "db_tables.log"))
  expect_true(any(grepl("^engine_memory: 3 rows -> ", log)))
  expect_equal(sink.number(), 0L)
})

test_that("a repetition with transactions but no tps stops, naming the cell", {
  sweep <- make_db_sweep()
  axes <- sweep$axes
  expect_silent(check_database_reps(sweep$summary, axes))
  bad <- copy(sweep$summary)[engine == "myrocks" & memory == "1G" & rep == 2L,
                             tps := NA_real_]
  expect_error(check_database_reps(bad, axes),
               "cell engine=myrocks, memory=1G, filesystem=ext4, threads=4 rep 2: tps is NA but transactions = 6050",
               fixed = TRUE)
  zero <- copy(sweep$summary)[engine == "innodb" & memory == "64M" & rep == 1L,
                              tps := 0]
  expect_error(check_database_reps(zero, axes), "rep 1: tps is 0 but transactions")
  # no transactions (or none counted): nothing to contradict
  idle <- copy(sweep$summary)[rep == 1L, `:=`(tps = 0, transactions = 0)]
  idle[rep == 2L, `:=`(tps = NA_real_, transactions = NA_real_)]
  expect_silent(check_database_reps(idle, axes))

  dir <- tempfile("dbtables")
  input <- write_db_sweep(list(summary = bad, samples = sweep$samples,
                               system = sweep$system, counters = sweep$counters))
  expect_error(rule_db_tables(input, db_tables_output(dir), list(axes = axes),
                    log = file.path(dir, "db_tables.log")),
               "engine=myrocks, memory=1G, filesystem=ext4, threads=4 rep 2: tps is NA",
               fixed = TRUE)
  expect_equal(sink.number(), 0L)
  expect_false(file.exists(file.path(dir, "engine_memory.csv")))
})
