# Loaded by testthat before the test files: the shared R code, and small
# hand-built sweeps written the way the aggregate step writes them.

# The analysis library (workflow/R), as the rule scripts load it.
source(testthat::test_path("..", "..", "workflow", "R", "library.R"), chdir = TRUE)

# A sweep over the given axis values (a named list, in axis order): a summary
# row per repetition and `duration` per-second samples per repetition.
# IOPS flatten and latency grows with threads, as on a saturating device.
make_sweep <- function(values = list(filesystem = c("ext4", "xfs"),
                                     threads = c(1L, 4L, 16L),
                                     workload = "rndrd",
                                     mode = c("sync", "async")),
                       reps = 2L, duration = 10L, seed = 42) {
  set.seed(seed)
  axes <- names(values)
  grid <- do.call(CJ, c(values, list(rep = seq_len(reps), sorted = FALSE)))
  threads <- if ("threads" %in% axes) grid$threads else rep(1L, nrow(grid))
  fs_factor <- if ("filesystem" %in% axes) ifelse(grid$filesystem == "xfs", 1.1, 1) else 1
  iops <- 7000 * threads / (1 + threads / 20) * fs_factor * runif(nrow(grid), 0.95, 1.05)
  lat <- 1000 * threads / iops
  summary <- data.table(
    grid,
    tool = "sysbench-fileio", kind = "storage", per_second = 1L,
    duration_s = duration,
    seconds = duration,
    iops = iops, read_iops = iops, write_iops = 0, mibs = iops * 16 / 1024,
    fsyncs = NA_real_,
    lat_mean_ms = lat, lat_p95_ms = lat * 1.4, lat_p99_ms = lat * 2,
    lat_max_ms = lat * 5
  )
  samples <- summary[rep(seq_len(.N), each = duration)]
  samples[, `:=`(
    second = rep(seq_len(duration), nrow(summary)),
    iops = iops * rnorm(.N, 1, 0.05),
    lat_ms = NA_real_,
    lat_pct_ms = lat_p95_ms * rnorm(.N, 1, 0.05)
  )]
  samples[, `:=`(time = 1.7e9 + second, mibs = iops * 16 / 1024)]
  samples <- samples[, c(axes, "rep", "second", "time", "iops", "mibs",
                         "lat_ms", "lat_pct_ms"), with = FALSE]
  list(axes = axes, summary = summary, samples = samples[])
}

PROVENANCE <- list(host = "testhost", cpu = "Test CPU 9000 @ 3.0GHz",
                   kernel = "6.1.0-test-amd64", memory_gb = 23.4,
                   tools = list(fio = "fio-3.33", sysbench = "sysbench 1.0.20"),
                   study = "demo")

# Writes a sweep as results/tables/ does; returns snakemake@input's fields.
write_sweep <- function(sweep, dir = tempfile("sweep")) {
  dir.create(dir, recursive = TRUE, showWarnings = FALSE)
  input <- list(summary = file.path(dir, "summary.csv.gz"),
                samples = file.path(dir, "samples.csv.gz"),
                provenance = file.path(dir, "provenance.json"))
  fwrite(sweep$summary, input$summary)
  fwrite(sweep$samples, input$samples)
  jsonlite::write_json(PROVENANCE, input$provenance, auto_unbox = TRUE)
  input
}

# Width and height of a PNG file, from its IHDR chunk.
png_size <- function(path) {
  bytes <- readBin(path, "raw", 24L)
  stopifnot(identical(bytes[2:4], charToRaw("PNG")))
  be32 <- function(b) sum(as.numeric(b) * 256^(3:0))
  c(width = be32(bytes[17:20]), height = be32(bytes[21:24]))
}

# The pixels save_plot() draws a plot at: plot_size() at its 110 dpi (test-plots.R checks them on
# drawn PNGs).
drawn_size <- function(p) plot_size(p) * 110

# What a rule's build function (build_sweep_plots, build_db_plots, build_figures) returns and the
# lines it logs, nothing drawn: list(plots, log). Drawing is most of a rule's time; each rule's tests
# draw one study, and read the plots of the other shapes of study from here.
build_logged <- function(build, input, params) {
  plots <- NULL
  log <- utils::capture.output(plots <- build(input, params))
  list(plots = plots, log = log)
}

# The plot is what save_plot() would draw, short of drawing it: a ggplot with layers, drawn at least
# 880 x 550 pixels. Whether ggplot2 draws it is the drawn study's check (each plot function is drawn
# once, in its rule's test file); a test that needs ggplot2's own layout builds the plot.
expect_drawable <- function(p, label) {
  expect_s3_class(p, "ggplot")
  expect_gte(length(p$layers), 1L, label = label)
  expect_gte(drawn_size(p)[["width"]], 880, label = label)
  expect_gte(drawn_size(p)[["height"]], 550, label = label)
}
