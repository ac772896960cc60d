
PLOT_NAMES <- c("throughput", "latency", "jitter", "boxplot")

plots_output <- function(dir) {
  as.list(stats::setNames(file.path(dir, paste0(PLOT_NAMES, ".png")), PLOT_NAMES))
}

# Runs rule_plots() on a sweep; returns the output paths and the plots. The one sweep these tests
# draw (drawing is most of a test's time): the other shapes of sweep are built, not drawn.
render <- function(sweep) {
  dir <- tempfile("plots")
  output <- plots_output(dir)
  plots <- rule_plots(write_sweep(sweep), output, list(axes = sweep$axes),
                      log = file.path(dir, "plots.log"))
  list(output = output, plots = plots)
}

expect_pngs <- function(output, plots) {
  for (name in PLOT_NAMES) {
    path <- output[[name]]
    expect_true(file.exists(path), label = name)
    expect_gt(file.size(path), 5000)
    # at least 8 x 5 in at 110 dpi; more with many cells
    expect_gte(png_size(path)[["width"]], 880)
    expect_gte(png_size(path)[["height"]], 550)
    expect_equal(png_size(path), drawn_size(plots[[name]]), label = name)
  }
}

# build_sweep_plots() on a sweep: the four plots rule_plots() would draw.
build_sweep <- function(sweep) {
  build_logged(build_sweep_plots, write_sweep(sweep), list(axes = sweep$axes))$plots
}

# Each of the four plots is drawable, at least 880 x 550 pixels, or skipped with its reason (drawn as
# a note of 880 x 550: the last test of this file).
expect_sweep_plots <- function(plots) {
  expect_named(plots, PLOT_NAMES)
  for (name in PLOT_NAMES) {
    p <- plots[[name]]
    if (is_skipped_plot(p)) {
      expect_match(p$reason, "[a-z]", label = name)
    } else {
      expect_drawable(p, name)
    }
  }
}

test_that("the rule draws the four plots as PNGs of 8x5 in or more and logs them", {
  drawn <- render(make_sweep())
  output <- drawn$output
  expect_pngs(output, drawn$plots)
  for (name in c("throughput", "latency")) {
    expect_equal(png_size(output[[name]]), c(width = 880, height = 550))
  }
  # 12 cells, one row each: taller
  for (name in c("jitter", "boxplot")) {
    expect_equal(png_size(output[[name]])[["width"]], 880)
    expect_gt(png_size(output[[name]])[["height"]], 550)
  }
  log <- readLines(file.path(dirname(output$throughput), "plots.log"))
  expect_true(any(grepl("^throughput -> ", log)))
  expect_equal(sink.number(), 0L)
})

test_that("a sweep without a threads axis gets its plots", {
  sweep <- make_sweep(list(filesystem = c("ext4", "xfs"), workload = "rndwr",
                           mode = c("sync", "async")))
  expect_sweep_plots(build_sweep(sweep))
  tp <- throughput_data(sweep$summary, sweep$axes)
  expect_equal(unique(tp$threads), 1L)
})

test_that("a sweep with only a threads axis, and one with many user axes, get their plots", {
  expect_sweep_plots(build_sweep(make_sweep(list(threads = c(1L, 4L, 16L, 64L, 256L)))))
  expect_sweep_plots(build_sweep(make_sweep(list(
    filesystem = "ext4", threads = c(1L, 4L), workload = "rndrd",
    mode = c("sync", "async"), block = c("4k", "16k"), memory = c("5", "10")
  ), reps = 1L, duration = 5L)))
})

test_that("throughput is the mean over reps with min and max", {
  summary <- data.table(filesystem = "ext4", threads = c(1L, 1L, 1L, 4L),
                        workload = "rndrd", rep = c(1L, 2L, 3L, 1L),
                        iops = c(100, 200, 600, 1000))
  tp <- throughput_data(summary, c("filesystem", "threads", "workload"))
  expect_equal(tp$threads, c(1L, 4L))
  expect_equal(tp$iops, c(300, 1000))
  expect_equal(tp$iops_min, c(100, 1000))
  expect_equal(tp$iops_max, c(600, 1000))
  expect_equal(tp$reps, c(3L, 1L))
  expect_equal(as.character(tp$series), c("all", "all"))  # workload does not vary
})

test_that("latency data holds avg and p95 per cell, means over reps", {
  summary <- data.table(threads = c(1L, 1L, 8L), rep = c(1L, 2L, 1L),
                        lat_mean_ms = c(0.1, 0.3, 1), lat_p95_ms = c(0.2, 0.4, NA))
  lat <- latency_data(summary, "threads")
  expect_equal(nrow(lat), 3L)  # the NA p95 is dropped
  expect_equal(lat[statistic == "avg", lat_ms], c(0.2, 1))
  expect_equal(lat[statistic == "p95", lat_ms], 0.3)
})

test_that("series name the axes other than threads and filesystem that vary", {
  sweep <- make_sweep(list(filesystem = "ext4", threads = 1L,
                           workload = c("rndrd", "rndwr"), mode = "sync",
                           block = c("4k", "16k")), reps = 1L)
  dt <- with_plot_columns(sweep$summary, sweep$axes)
  expect_equal(levels(dt$series), c("workload=rndrd, block=4k", "workload=rndrd, block=16k",
                                    "workload=rndwr, block=4k", "workload=rndwr, block=16k"))
  only_threads <- with_plot_columns(sweep$summary, c("filesystem", "threads"))
  expect_equal(levels(only_threads$series), "all")
})

test_that("cell labels name only the axes that vary, filesystem as facet", {
  sweep <- make_sweep(list(filesystem = c("ext4", "xfs"),
                           threads = c(1L, 4L, 16L), workload = "rndrd"),
                      reps = 1L, duration = 3L)
  dt <- per_cell_data(sweep$samples, sweep$axes)
  expect_equal(attr(dt, "label_axes"), "threads")
  expect_true(attr(dt, "facet"))
  # numeric order, the first cell on top
  expect_equal(rev(levels(dt$cell)), c("threads=1", "threads=4", "threads=16"))
  expect_equal(fixed_axes_text(dt, sweep$axes), "workload = rndrd")

  two <- per_cell_data(sweep$samples[filesystem == "ext4"], sweep$axes)
  expect_false(attr(two, "facet"))
  expect_equal(fixed_axes_text(two, sweep$axes),
               "filesystem = ext4, workload = rndrd")
})

test_that("many cells make a taller image, a row per cell", {
  sweep <- make_sweep(list(threads = c(1L, 2L, 4L, 8L, 16L, 32L, 64L),
                           mode = c("sync", "async")), reps = 1L, duration = 3L)
  dt <- per_cell_data(sweep$samples, sweep$axes)
  expect_equal(nlevels(dt$cell), 14L)
  expect_true("threads=64, mode=sync" %in% levels(dt$cell))
  few <- per_cell_data(sweep$samples[threads <= 2], sweep$axes)
  expect_gt(attr(dt, "size")[["height"]], attr(few, "size")[["height"]])
})

test_that("a sweep without IOPS or latency figures still gets its plots", {
  sweep <- make_sweep(list(threads = c(1L, 4L)), reps = 1L, duration = 3L)
  sweep$summary[, c("iops", "lat_mean_ms", "lat_p95_ms") := NA_real_]
  sweep$samples[, iops := NA_real_]
  expect_sweep_plots(build_sweep(sweep))
})

test_that("save_plot draws a plot at its size at 110 dpi", {
  tall <- with_size(ggplot() + geom_blank(), c(width = 8, height = 12))
  expect_equal(png_size(save_plot(tall, tempfile(fileext = ".png"))), c(width = 880, height = 1320))
  expect_equal(drawn_size(tall), c(width = 880, height = 1320))
  expect_equal(drawn_size(ggplot()), c(width = 880, height = 550))
})

test_that("the caption names host, CPU, kernel and tool versions", {
  caption <- caption_text(PROVENANCE)
  for (part in c("testhost", "Test CPU 9000", "6.1.0-test-amd64", "fio-3.33",
                 "sysbench 1.0.20", "23.4 GB")) {
    expect_match(caption, part, fixed = TRUE)
  }
  expect_match(caption_text(list()), "host unknown, CPU unknown, kernel unknown",
               fixed = TRUE)
})

test_that("the project theme and palette", {
  expect_equal(theme_dbsweep()$text$size, 11)
  expect_equal(dbsweep_palette(3), c("#0072B2", "#D55E00", "#009E73"))
  expect_length(unique(dbsweep_palette(12)), 12)
  p <- plot_throughput(make_sweep()$summary,
                       c("filesystem", "threads", "workload", "mode"), "cap")
  expect_equal(p$labels$x, "threads")
  expect_equal(p$labels$y, "IOPS")
  expect_equal(p$labels$caption, "cap")
})

test_that("a plot that cannot say anything for the study is skipped and listed with its reason", {
  # one thread count: no vs-threads plot (a lone point); two cells: the spread plots stay
  sweep <- make_sweep(list(filesystem = c("ext4", "xfs"), threads = 1L), reps = 1L, duration = 3L)
  plots <- sweep_plots(sweep$summary, sweep$samples, sweep$axes, "c")
  expect_true(is_skipped_plot(plots$throughput) && is_skipped_plot(plots$latency))
  expect_match(plots$throughput$reason, "needs a threads axis with two values or more")
  expect_false(is_skipped_plot(plots$jitter) || is_skipped_plot(plots$boxplot))
  # one cell: all four skipped; the rule lists them by file name in its skipped CSV
  one <- make_sweep(list(filesystem = "tmpfs", threads = 1L), reps = 2L, duration = 3L)
  dir <- tempfile("plots")
  output <- c(plots_output(dir), skipped = file.path(dir, "skipped_sweep_plots.csv"))
  output$throughput <- file.path(dir, "throughput_vs_threads.png")
  rule_plots(write_sweep(one), output, list(axes = one$axes), log = file.path(dir, "plots.log"))
  skipped <- fread(output$skipped)
  expect_equal(skipped$plot, c("throughput_vs_threads", "latency", "jitter", "boxplot"))
  expect_match(skipped[plot == "jitter", reason], "^one cell")
  expect_true(all(file.exists(unlist(output))))  # each drawn as a note saying why
  # two thread counts and two cells: nothing skipped
  two <- make_sweep(list(threads = c(1L, 4L)), reps = 1L, duration = 3L)
  expect_false(any(vapply(sweep_plots(two$summary, two$samples, two$axes, "c"), is_skipped_plot, TRUE)))
})
