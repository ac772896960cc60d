# The statistics and figures rules end to end on small hand-built studies.

ALL_KINDS <- c("timeseries_steady", "violin", "ci_vs_threads", "ratio_heatmap",
               "latency_percentiles")

run_statistics <- function(sweep, input, baseline = list(), kinds = ALL_KINDS) {
  dir <- tempfile("stats")
  tables <- list(steady_state = file.path(dir, "steady_state.csv"),
                 cell_stats_csv = file.path(dir, "cell_stats.csv"),
                 cell_stats_md = file.path(dir, "cell_stats.md"),
                 comparisons_csv = file.path(dir, "comparisons.csv"),
                 comparisons_md = file.path(dir, "comparisons.md"))
  params <- list(axes = sweep$axes, baseline = baseline, analysis = list(plots = kinds))
  result <- rule_statistics(input, tables, params, log = file.path(dir, "statistics.log"))
  output <- c(as.list(stats::setNames(file.path(dir, paste0(kinds, ".png")), kinds)),
              skipped = file.path(dir, "skipped_plots.csv"))
  rule_figures(c(input, tables), output, params, log = file.path(dir, "figures.log"))
  list(result = result, tables = tables, output = output)
}

# The database study's statistics with myrocks as the engines' baseline, and its figures drawn, once for
# the two tests that read them (the statistics and the drawing are most of a test's time).
db_run <- local({
  run <- NULL
  function() {
    if (is.null(run)) {
      sweep <- make_db_sweep(duration = 30L)  # one thread count, no percentiles
      run <<- run_statistics(sweep, write_db_sweep(sweep), baseline = list(engine = "myrocks"))
    }
    run
  }
})

test_that("a database study: windows, statistics, comparisons with the named baseline", {
  run <- db_run()
  windows <- fread(run$tables$steady_state)
  expect_equal(nrow(windows), 12L)
  stalled <- windows[stall_seconds > 0]
  expect_equal(stalled[, .(engine, memory, rep, stall_seconds, longest_stall_s)],
               data.table(engine = "innodb", memory = "256M", rep = 1L,
                          stall_seconds = 2L, longest_stall_s = 2L))
  cells <- fread(run$tables$cell_stats_csv)
  expect_setequal(unique(cells$metric), c("tps", "lat_p95_ms"))
  tps <- cells[metric == "tps"]
  expect_true(all(tps$ci_low <= tps$median & tps$median <= tps$ci_high))
  expect_equal(unique(tps$ci_method), "bootstrap over 2 repetitions")
  cmp <- fread(run$tables$comparisons_csv)
  expect_equal(unique(cmp[axis == "engine", baseline]), "myrocks")
  expect_equal(unique(cmp[axis == "memory", baseline]), "64M")
  # innodb at 64M: 200 against myrocks' 450 tps, far beyond the 10% spread
  low <- cmp[axis == "engine" & metric == "tps" & memory == "64M"]
  expect_equal(low$verdict, "lower")
  expect_equal(low$ratio, 200 / 450, tolerance = 0.05)
  md <- readLines(run$tables$comparisons_md)
  expect_true("## engine (baseline myrocks), tps" %in% md)
  expect_true(any(grepl("^\\| memory \\| innodb \\| myrocks \\| innodb/myrocks \\|$", md)))
  expect_true(any(grepl("Mann|CI contains 1", md)))
})

test_that("kinds the data cannot support are skipped with a note, the others drawn", {
  run <- db_run()
  skipped <- fread(run$output$skipped)
  expect_setequal(skipped$plot, c("ci_vs_threads", "latency_percentiles"))
  expect_match(skipped[plot == "ci_vs_threads", reason], "threads axis with two values")
  for (k in ALL_KINDS) expect_gt(file.size(run$output[[k]]), 5000)
  log <- readLines(sub("skipped_plots.csv", "figures.log", run$output$skipped))
  expect_true(any(grepl("^ci_vs_threads -> .*\\(skipped: needs a threads axis", log)))
})

test_that("a storage sweep over threads gets ribbons; a study picks its plots", {
  sweep <- make_sweep()
  run <- run_statistics(sweep, write_sweep(sweep), kinds = c("ci_vs_threads", "violin"))
  expect_equal(nrow(fread(run$output$skipped)), 0L)
  expect_false(file.exists(sub("violin", "timeseries_steady", run$output$violin)))
  cells <- fread(run$tables$cell_stats_csv)
  expect_setequal(unique(cells$metric), c("iops", "lat_p95_ms"))
  expect_equal(unique(cells[metric == "iops", ci_method]), "bootstrap over 2 repetitions")
})

test_that("a baseline the data lacks stops with the axis and the value", {
  sweep <- make_db_sweep(duration = 30L)
  expect_error(run_statistics(sweep, write_db_sweep(sweep), baseline = list(engine = "postgresql")),
               "engine = postgresql is not in the data \\(innodb, myrocks\\)")
})

test_that("latency percentile curves are drawn from the percentiles table", {
  sweep <- make_sweep()
  input <- write_sweep(sweep)
  keys <- unique(sweep$summary[, c(sweep$axes, "rep"), with = FALSE])
  pct <- keys[, .(percentile = c(1, 50, 90, 99, 99.9, 100),
                  lat_ms = c(0.1, 0.2, 0.4, 1, 3, 9)), by = c(sweep$axes, "rep")]
  pct[, source := "fio clat percentiles"]
  input$percentiles <- file.path(dirname(input$summary), "percentiles.csv.gz")
  fwrite(pct, input$percentiles)
  run <- run_statistics(sweep, input, kinds = "latency_percentiles")
  expect_equal(nrow(fread(run$output$skipped)), 0L)
  p <- plot_latency_percentiles(
    read_table(input$percentiles, sweep$axes, c("rep", "percentile", "lat_ms")), sweep$axes, "cap")
  expect_false(any(p$data$percentile >= 100))  # 100% is off the nines scale
  expect_match(p$labels$y, "ms")
  # a fio-only study's curves name fio's percentiles, never sysbench's histogram
  expect_match(p$labels$subtitle, "from fio clat percentiles")
  expect_false(grepl("sysbench", p$labels$subtitle))
  both <- copy(pct)[, source := ifelse(rep == 1L, "fio clat percentiles", "sysbench histogram")]
  q <- plot_latency_percentiles(both, sweep$axes, "cap")
  expect_match(q$labels$subtitle, "fio clat percentiles and\\s+sysbench histogram")
})

test_that("the time series draws each cell's latency beside its throughput, on the same seconds", {
  dt <- CJ(threads = c(1L, 4L), rep = 1L, second = 1:20)
  dt[, `:=`(throughput_metric = "iops", throughput = 1000 * threads + second,
            latency = ifelse(threads == 1L, 0.5, 2))]
  windows <- CJ(threads = c(1L, 4L), rep = 1L)[, `:=`(window_start = 5L, window_end = 20L,
                                                      stall_threshold = 0, steady = TRUE)]
  p <- plot_timeseries_steady(dt, windows, "threads", "cap")
  built <- ggplot_build(p)
  lines <- as.data.table(p$data)
  expect_equal(levels(lines$measure), c("IOPS (I/O per s)", "latency (ms), per second"))
  expect_equal(lines[measure == "latency (ms), per second", unique(value)], c(0.5, 2))
  expect_equal(lines[measure == "IOPS (I/O per s)" & second == 3, value], c(1003, 4003))
  # one row per cell: throughput left, latency right, sharing the x axis
  layout <- as.data.table(built$layout$layout)
  expect_equal(max(layout$ROW), 2L)
  expect_equal(max(layout$COL), 2L)
  expect_equal(attr(p, "panel_rows"), 2L)
  # no per-second latency: throughput alone, as before
  q <- plot_timeseries_steady(copy(dt)[, latency := NA_real_], windows, "threads", "cap")
  expect_equal(levels(as.data.table(q$data)$measure), c("IOPS (I/O per s)", "latency (ms), per second"))
  expect_equal(nrow(as.data.table(q$data)[measure != "IOPS (I/O per s)"]), 0L)
  expect_equal(max(as.data.table(ggplot_build(q)$layout$layout)$COL), 1L)
  expect_gt(file.size(save_plot(p, tempfile(fileext = ".png"))), 5000)  # it renders
})

test_that("a study with nothing compared says why, truthfully: workloads side by side, or one cell", {
  two <- data.table(filesystem = "tmpfs", workload = c("fio-rr", "sb-rr"), metric = "iops", median = 1)
  expect_match(nothing_compared(two, c("filesystem", "workload")), "^Nothing is compared.*workload is the only axis")
  one <- two[1]
  expect_match(nothing_compared(one, c("filesystem", "workload")), "no axis has two values or more")
  lines <- comparisons_md_lines(two, data.table(), c("filesystem", "workload"), STATS_DEFAULTS)
  expect_false(any(grepl("No axis with two values", lines)))
  expect_true(any(grepl("side by side", lines)))
})
