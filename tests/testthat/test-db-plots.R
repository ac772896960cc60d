
DB_PLOT_NAMES <- c("tps_memory", "io_per_txn", "cpu", "datadir", "jitter_memory",
                   "boxplot_memory", "timeseries")

db_plots_output <- function(dir) {
  files <- c("tps_vs_memory", "io_per_txn", "cpu", "datadir", "jitter_memory",
             "boxplot_memory", "timeseries")
  as.list(stats::setNames(file.path(dir, "plots", paste0(files, ".png")),
                          DB_PLOT_NAMES))
}

# The statistics rule's steady-state windows of per-second tps (as
# steady_state.csv holds them).
tps_windows <- function(samples, axes) {
  steady_windows(samples[second >= 1L & !is.na(tps)], c(axes, "rep"), "tps")
}

# Runs rule_db_plots() on a study; returns the output paths and the plots.
render_db <- function(sweep) {
  dir <- tempfile("dbplots")
  output <- db_plots_output(dir)
  plots <- rule_db_plots(write_db_study(sweep), output, list(axes = sweep$axes, baseline = list()),
                log = file.path(dir, "db_plots.log"))
  list(output = output, plots = plots, log = file.path(dir, "db_plots.log"))
}

# build_db_plots() on a study: the plots rule_db_plots() would draw, and the lines it logs.
build_db <- function(sweep) {
  build_logged(build_db_plots, write_db_study(sweep), list(axes = sweep$axes, baseline = list()))
}

expect_db_pngs <- function(output, plots) {
  for (name in DB_PLOT_NAMES) {
    path <- output[[name]]
    expect_true(file.exists(path), label = name)
    expect_gt(file.size(path), 5000)
    expect_equal(png_size(path)[["width"]], 880)  # 8 in at 110 dpi
    expect_gte(png_size(path)[["height"]], 550)
    expect_equal(png_size(path), drawn_size(plots[[name]]), label = name)
  }
}

# Each of the seven plots is drawable, 880 pixels wide and 550 or more tall.
expect_db_plots <- function(plots) {
  expect_named(plots, DB_PLOT_NAMES)
  for (name in DB_PLOT_NAMES) {
    expect_drawable(plots[[name]], name)
    expect_equal(drawn_size(plots[[name]])[["width"]], 880, label = name)  # 8 in at 110 dpi
  }
}

# The message of a not-applicable plot (empty_plot()), else NULL.
plot_message <- function(p) {
  if (length(p$layers) != 1) return(NULL)
  p$layers[[1]]$aes_params$label
}

# The default sweep drawn once, for the two tests that read it, the one study these tests draw: every
# other shape of study is built, not drawn (drawing seven PNGs is most of a test's time).
default_render <- local({
  result <- NULL
  function() {
    if (is.null(result)) result <<- render_db(make_db_sweep())
    result
  }
})

test_that("the rule draws the seven plots and logs them", {
  result <- default_render()
  expect_db_pngs(result$output, result$plots)
  for (name in DB_PLOT_NAMES) expect_null(plot_message(result$plots[[name]]), label = name)
  log <- readLines(result$log)
  expect_match(log[1], "12 database repetitions (0 rows of other tools left out), 120 per-second samples",
               fixed = TRUE)
  expect_true(any(grepl("^timeseries -> .*timeseries.png$", log)))
  expect_equal(sink.number(), 0L)
})

test_that("every axis names its unit, under the project's caption", {
  plots <- default_render()$plots
  expect_equal(plots$tps_memory$labels$y, "transactions/s")
  expect_equal(plots$io_per_txn$labels$y, "KB per transaction")
  expect_equal(plots$cpu$labels$y, "CPU time (%)")
  expect_equal(plots$datadir$labels$y, "datadir size (MB)")
  expect_match(plots$datadir$labels$x, "(s)", fixed = TRUE)
  expect_match(plots$timeseries$labels$x, "(s)", fixed = TRUE)
  expect_equal(plots$timeseries$labels$y, "transactions/s")
  expect_match(plots$jitter_memory$labels$y, "^transactions/s")
  expect_match(plots$boxplot_memory$labels$y, "^transactions/s")
  for (name in DB_PLOT_NAMES) {
    expect_match(plots[[name]]$labels$caption, "host dbhost", label = name)
    expect_match(plots[[name]]$labels$caption, "10.11.19-MariaDB", label = name)
    expect_equal(plots[[name]]$theme$legend.position, "bottom", label = name)
  }
})

test_that("tps vs memory: median, min and max per engine, memory by size", {
  sweep <- make_db_sweep(list(engine = c("myrocks", "innodb"),
                              memory = c("1G", "256M", "64M")), reps = 3L)
  dt <- tps_memory_data(database_rows(sweep$summary), sweep$axes)
  expect_equal(levels(dt$memory), c("64M", "256M", "1G"))
  expect_equal(levels(dt$.colour), c("innodb", "myrocks"))
  setorder(dt, .colour, memory)
  expect_equal(dt$tps, c(200, 500, 800, 450, 500, 550))
  expect_equal(dt$tps_min, 0.9 * dt$tps)
  expect_equal(dt$tps_max, 1.1 * dt$tps)
  expect_equal(dt$reps, rep(3L, 6))
})

test_that("KB per transaction: read and written per engine and memory", {
  sweep <- make_db_sweep()
  dt <- io_per_txn_data(database_rows(sweep$summary), sweep$axes)
  expect_equal(levels(dt$direction), c("KB read", "KB written"))
  innodb <- dt[.colour == "innodb"][order(direction, memory)]
  expect_equal(innodb$kb_per_txn, c(160, 40, 10, 34, 16, 11.5))
  expect_equal(dt[.colour == "myrocks", unique(kb_per_txn)], c(8, 6))
})

test_that("CPU: means over the measured window only, storage rows left out", {
  sweep <- make_db_sweep(storage = TRUE)
  summary <- database_rows(sweep$summary)
  system <- database_part(sweep$system, summary, sweep$axes)
  expect_false(any(system$us == 90))  # the storage rows
  dt <- cpu_data(system, summary, sweep$axes)
  innodb_64 <- dt[engine == "innodb" & memory == "64M"]
  # inside the window us 20, sy 8, wa 60; before and after it us 1, sy 1, wa 0
  expect_equal(innodb_64$percent, c(20, 8, 60, 12))
  expect_equal(as.character(innodb_64$state),
               c("user (us)", "system (sy)", "IO wait (wa)", "idle (id)"))
  myrocks_1g <- dt[engine == "myrocks" & memory == "1G"]
  expect_equal(myrocks_1g$percent, c(55, 12, 3, 30))
  expect_equal(nrow(dt), 6L * 4L)

  # a window shorter than the rows: the summary's seconds bound it
  short <- copy(summary)[, seconds := 5L]
  system[second == 7L, us := 99]
  expect_equal(cpu_data(system, short, sweep$axes)[engine == "innodb" & memory == "64M",
                                                    percent], c(20, 8, 60, 12))
})

test_that("datadir size in MB from the datadir_bytes counters", {
  sweep <- make_db_sweep()
  dt <- datadir_data(sweep$counters, sweep$axes)
  expect_equal(nrow(dt), 12L * 4L)  # every 5 s from -5 to 10
  first <- dt[engine == "innodb" & memory == "64M" & rep == 1L]
  expect_equal(first$second, c(-5L, 0L, 5L, 10L))
  expect_equal(first$mb, c(120, 120, 125.5, 131))
})

test_that("the time series marks the stalled seconds", {
  sweep <- make_db_sweep()
  dt <- timeseries_data(sweep$samples, tps_windows(sweep$samples, sweep$axes), sweep$axes)
  stalls <- dt[stall == TRUE]
  expect_equal(nrow(stalls), 2L)
  expect_equal(stalls$second, 5:6)
  expect_equal(unique(stalls[, .(engine, memory, rep)]),
               data.table(engine = "innodb", memory = "256M", rep = 1L))
  expect_true(all(stalls$tps == 0))

  p <- plot_timeseries(sweep$samples, tps_windows(sweep$samples, sweep$axes), database_rows(sweep$summary), sweep$axes, "cap")
  expect_equal(p$labels$subtitle, "2 stalled second(s) marked; filesystem = ext4, threads = 4")
  expect_s3_class(p$facet, "FacetGrid")  # engine ~ memory
  expect_equal(attr(p, "panel_rows"), 2L)

  calm <- make_db_sweep(stall = NULL)
  p <- plot_timeseries(calm$samples, tps_windows(calm$samples, calm$axes), database_rows(calm$summary), calm$axes, "cap")
  expect_match(p$labels$subtitle, "^no stalls")
})

test_that("a stall is relative to its own repetition's median", {
  samples <- data.table(engine = "innodb", rep = rep(1:2, each = 4),
                        second = rep(1:4, 2),
                        tps = c(100, 100, 49, 100, 40, 40, 40, 19))
  dt <- timeseries_data(samples, tps_windows(samples, "engine"), "engine")
  expect_equal(dt$stall, c(FALSE, FALSE, TRUE, FALSE, FALSE, FALSE, FALSE, TRUE))
  flat <- data.table(engine = "x", rep = 1L, second = 1:3, tps = 0)
  zero <- timeseries_data(flat, tps_windows(flat, "engine"), "engine")
  expect_false(any(zero$stall))
})

test_that("storage cells in a database study are left out of every plot", {
  result <- build_db(make_db_sweep(storage = TRUE))
  expect_db_plots(result$plots)
  log <- result$log
  expect_match(log[1], "12 database repetitions (2 rows of other tools left out), 120 per-second samples",
               fixed = TRUE)
  expect_equal(levels(result$plots$jitter_memory$data$memory), c("64M", "256M", "1G"))
  expect_false(anyNA(result$plots$timeseries$data$engine))
})

test_that("plots a study cannot give say so, in a plot of their own", {
  sweep <- make_db_sweep(list(engine = "postgresql",
                              durability = c("default", "tuned", "unsafe")),
                         reps = 1L, duration = 5L)
  result <- build_db(sweep)
  expect_db_plots(result$plots)
  for (name in c("tps_memory", "io_per_txn", "cpu", "jitter_memory", "boxplot_memory")) {
    expect_equal(plot_message(result$plots[[name]]),
                 "not applicable: this study has no memory axis", label = name)
  }
  expect_null(plot_message(result$plots$timeseries))
  expect_null(plot_message(result$plots$datadir))
})

test_that("a study of storage cells only still gets its plots", {
  sweep <- make_sweep(list(filesystem = "ext4", threads = c(1L, 4L)), reps = 1L,
                      duration = 3L)
  sweep$summary[, (DATABASE_SUMMARY_COLUMNS) := NA_real_]
  sweep$samples[, (DATABASE_SAMPLES_COLUMNS) := NA_real_]
  system <- copy(sweep$samples)[, c(sweep$axes, "rep", "second", "time"), with = FALSE]
  system[, (setdiff(SYSTEM_COLUMNS, c("rep", "second", "time", "device"))) := 1]
  system[, device := "vda"]
  setcolorder(system, c(sweep$axes, SYSTEM_COLUMNS))
  sweep$system <- system
  sweep$counters <- copy(sweep$samples)[, c(sweep$axes, "rep", "second", "time"),
                                        with = FALSE]
  sweep$counters[, `:=`(name = "datadir_bytes", value = 1)]
  result <- build_db(sweep)
  expect_db_plots(result$plots)
  for (name in c("datadir", "timeseries")) {
    expect_equal(plot_message(result$plots[[name]]), NO_DATABASE_CELLS, label = name)
  }
  expect_equal(plot_message(result$plots$tps_memory),
               "not applicable: this study has no memory axis")
})

test_that("a study without datadir counters or with one repetition", {
  sweep <- make_db_sweep(reps = 1L, stall = NULL)
  sweep$counters <- sweep$counters[name != "datadir_bytes"]
  result <- build_db(sweep)
  expect_db_plots(result$plots)
  expect_equal(plot_message(result$plots$datadir),
               "no datadir_bytes counters in this study")
})

test_that("many panels make a taller image; other axes become panels", {
  sweep <- make_db_sweep(list(engine = "innodb", memory = c("64M", "256M", "1G"),
                              filesystem = c("ext4", "xfs"),
                              binlog = c("off", "sync0", "sync1")),
                         stall = list(engine = "innodb", memory = "1G", rep = 1L,
                                      seconds = 4:5))
  result <- build_db(sweep)
  expect_db_plots(result$plots)
  # filesystem + memory ~ binlog: 6 rows of panels
  expect_equal(attr(result$plots$timeseries, "panel_rows"), 6L)
  expect_equal(max(ggplot_build(result$plots$timeseries)$layout$layout$ROW), 6L)
  expect_gt(drawn_size(result$plots$timeseries)[["height"]], 1000)
  expect_equal(drawn_size(result$plots$tps_memory)[["height"]], 550)  # 2 rows
  expect_equal(result$plots$timeseries$labels$subtitle, "12 stalled second(s) marked; engine = innodb")
  tps <- tps_memory_data(database_rows(sweep$summary), sweep$axes)
  expect_named(tps, c("filesystem", "binlog", "memory", ".colour", "tps", "tps_min",
                      "tps_max", "reps"))
  expect_equal(levels(tps$binlog), c("off", "sync0", "sync1"))
})

test_that("the system table's placed nodes' hosts' rows are left out of the run's own host's figures", {
  path <- tempfile(fileext = ".csv")
  dt <- data.table(engine = "innodb", rep = 1L, second = c(1L, 1L, 2L, 2L), time = c(1, 1, 2, 2),
                   node = c("", "primary", "", "primary"), node_host = c("c1", "c2", "c1", "c2"))
  dt[, (setdiff(SYSTEM_COLUMNS, c("rep", "second", "time"))) := 1]
  dt[node == "primary", us := 100]
  fwrite(dt, path)
  got <- read_system(path, "engine")
  expect_equal(got$node_host, c("c1", "c1"))
  expect_equal(got$us, c(1, 1))
  unlink(path)
})
