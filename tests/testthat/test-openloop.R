
# An open-loop study at 3000/s: 1 thread falls behind (a growing queue, the
# latency growing with it), 4 threads keep up; one closed-loop cell beside
# them (no rate) that the open-loop outputs must leave out.
make_open_loop <- function(duration = 5L) {
  axes <- c("engine", "threads", "workload")
  cells <- data.table(engine = "innodb", threads = c(1L, 4L, 4L),
                      workload = c("open", "open", "closed"),
                      rate = c(3000, 3000, NA), short = c(1L, 0L, NA))
  summary <- cells[, .(engine, threads, workload, rep = 1L, tool = "sysbench", kind = "database", per_second = 1L,
                       duration_s = duration, seconds = duration, iops = NA,
                       read_iops = NA, write_iops = NA, mibs = NA, fsyncs = NA,
                       lat_mean_ms = 5, lat_p95_ms = fifelse(is.na(rate), 4, NA_real_),
                       lat_p99_ms = fifelse(is.na(rate), NA_real_, 9), lat_max_ms = 20,
                       tps = fifelse(short %in% 1L, 1000, 2990),
                       rate, rate_achieved = fifelse(short %in% 1L, 1000, 2990),
                       queue_max = fifelse(short %in% 1L, 10000, 0),
                       queue_end = fifelse(short %in% 1L, 10000, 0),
                       rate_short = short)]
  samples <- cells[, .(second = seq_len(duration)), by = .(engine, threads, workload, rate, short)]
  samples[, `:=`(rep = 1L, time = 1.7e9 + second, iops = NA, mibs = NA, lat_ms = NA,
                 tps = 1000,
                 lat_pct_ms = fifelse(is.na(rate), 4, NA_real_),
                 queue = fifelse(is.na(rate), NA_real_, fifelse(short == 1L, 2000 * second, 0)),
                 lat_p99_ms = fifelse(is.na(rate), NA_real_,
                                      fifelse(short == 1L, 700 * second, 3)))]
  samples[, c("rate", "short") := NULL]
  dir <- tempfile("openloop")
  dir.create(dir)
  input <- list(summary = file.path(dir, "summary.csv.gz"),
                samples = file.path(dir, "samples.csv.gz"),
                provenance = file.path(dir, "provenance.json"))
  fwrite(summary, input$summary)
  fwrite(samples, input$samples)
  jsonlite::write_json(list(study = "open", host = "h", cpu = "c", kernel = "k",
                            tools = list(sysbench = "sysbench 1.0.20")),
                       input$provenance, auto_unbox = TRUE)
  list(axes = axes, input = input, dir = dir)
}

test_that("the table keeps the short cell, marked, and leaves closed-loop cells out", {
  study <- make_open_loop()
  summary <- open_loop_rows(read_table(study$input$summary, study$axes))
  table <- open_loop_table(summary, study$axes)
  expect_equal(table$threads, c(1L, 4L))
  expect_equal(table$status, c("short of its rate", "kept up"))
  expect_equal(table$achieved_pct, c(100 * 1000 / 3000, 100 * 2990 / 3000))
  expect_equal(table$queue_end, c(10000, 0))
})

test_that("the series marks the short thread count in its legend label", {
  study <- make_open_loop()
  summary <- open_loop_rows(read_table(study$input$summary, study$axes))
  samples <- read_table(study$input$samples, study$axes)
  series <- open_loop_series(samples, summary, study$axes)
  expect_equal(levels(series$.threads), c("1 (short of its rate)", "4"))
  expect_false(any(series$workload == "closed"))
  expect_equal(nrow(series), 10L)
})

test_that("the rule writes the table and both plots", {
  study <- make_open_loop()
  output <- list(table_csv = file.path(study$dir, "openloop.csv"),
                 table_md = file.path(study$dir, "openloop.md"),
                 p99 = file.path(study$dir, "p99.png"),
                 queue = file.path(study$dir, "queue.png"))
  plots <- rule_openloop(study$input, output, list(axes = study$axes),
                log = file.path(study$dir, "openloop.log"))
  expect_equal(fread(output$table_csv)$status, c("short of its rate", "kept up"))
  md <- readLines(output$table_md)
  expect_true(any(grepl("short of its rate", md)))
  for (name in c("p99", "queue")) {
    expect_equal(png_size(output[[name]])[["width"]], 880)
    expect_gt(file.size(output[[name]]), 5000)
  }
  expect_equal(plots$p99$labels$y, "p99 latency (ms, log scale)")
  expect_true(any(grepl("1 open-loop|2 open-loop", readLines(file.path(study$dir, "openloop.log")))))
})

test_that("a study without open-loop samples still gets its plots, saying so", {
  study <- make_open_loop()
  summary <- open_loop_rows(read_table(study$input$summary, study$axes))[0]
  samples <- read_table(study$input$samples, study$axes)
  p <- plot_p99(samples, summary, study$axes, "caption")
  expect_match(p$layers[[1]]$aes_params$label, "no lat_p99_ms")
})

test_that("a rate given as a share of the calibration shows the share and the rate it made", {
  study <- make_open_loop()
  summary <- open_loop_rows(read_table(study$input$summary, study$axes))
  summary[, `:=`(rate_percent = 80, rate_calibrated_tps = 3750)]
  table <- open_loop_table(summary, study$axes)
  expect_equal(names(table)[5:7], c("rate_percent", "rate_calibrated_tps", "rate"))
  expect_equal(table$rate_percent, c(80, 80))
  expect_false("rate_percent" %in% names(open_loop_table(summary[, !"rate_percent"], study$axes)))
})
