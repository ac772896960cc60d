# Every plot kind on one study with long axis values, storage cells (no
# engine, no memory: NA) beside database cells: the labels each plot builds
# (subtitle, legend, facet strips, axis ticks) name only the axes that vary
# among its rows, never say NA, and wrap to the image's width.

LONG_STORAGE <- c("fileio-random-read-16k-direct-io", "fio-random-read-16k-psync-direct")
LONG_OLTP <- "oltp-read-write-4-tables-25000-rows"

# Storage cells over filesystem x threads x two long workloads, and database
# cells over engine x memory on xfs at 4 threads; axes in the study's order.
long_study <- function() {
  axes <- c("engine", "memory", "filesystem", "threads", "workload")
  storage <- make_sweep(list(filesystem = c("ext4", "xfs"), threads = c(1L, 4L),
                             workload = LONG_STORAGE), reps = 2L, duration = 12L)
  for (part in c("summary", "samples")) {
    storage[[part]][, `:=`(engine = NA_character_, memory = NA_character_)]
  }
  db <- make_db_sweep(list(engine = c("innodb", "myrocks"), memory = c("64M", "1G"),
                           filesystem = "xfs", threads = 4L, workload = LONG_OLTP),
                      duration = 12L)
  list(axes = axes,
       summary = rbind(db$summary, storage$summary, fill = TRUE),
       samples = rbind(db$samples, storage$samples, fill = TRUE),
       system = db$system, counters = db$counters)
}

# The texts a plot shows besides its data: subtitle, legend entries, facet
# strips (through the plot's own labeller) and discrete axis ticks.
built_labels <- function(p) {
  b <- ggplot_build(p)
  legend <- unlist(lapply(b$plot$scales$scales, function(s) {
    if (s$is_discrete() && !any(s$aesthetics %in% c("x", "y"))) s$get_labels()
  }))
  ticks <- unlist(lapply(b$layout$panel_params, function(pp) {
    unlist(lapply(c("x", "y"), function(a) {
      scale <- pp[[a]]
      if (!is.null(scale) && scale$is_discrete()) scale$get_labels()
    }))
  }))
  params <- p$facet$params
  layout <- as.data.frame(b$layout$layout)
  sets <- list(wrap = params$facets, rows = params$rows, cols = params$cols)
  strips <- unlist(lapply(names(sets), function(type) {
    vars <- names(sets[[type]])
    if (!length(vars)) return(NULL)
    df <- unique(layout[vars])
    attr(df, "facet") <- if (type == "wrap") "wrap" else "grid"
    attr(df, "type") <- if (type == "wrap") "rows" else type
    unlist(params$labeller(df))
  }))
  list(subtitle = p$labels$subtitle, legend = as.character(legend),
       strips = as.character(strips), ticks = as.character(ticks))
}

lines_of <- function(x) unlist(strsplit(as.character(x), "\n", fixed = TRUE))

says_na <- function(x) any(grepl("(^|[^A-Za-z])NA([^A-Za-z]|$)", x))

expect_readable <- function(p, name) {
  labels <- built_labels(p)
  for (part in names(labels)) {
    expect_false(says_na(labels[[part]]), label = paste(name, part))
  }
  # 8 in at 11 pt: a subtitle line holds about 92 characters
  expect_true(all(nchar(lines_of(labels$subtitle)) <= 92), label = paste(name, "subtitle"))
  expect_true(all(nchar(lines_of(labels$strips)) <= 93), label = paste(name, "strips"))
  invisible(labels)
}

test_that("every plot kind names only its varying axes, never NA, and wraps", {
  study <- long_study()
  axes <- study$axes
  dir <- tempfile("labels")
  input <- write_db_study(study)
  keys <- c(axes, "rep")
  pct <- unique(study$summary[, ..keys])[rep(seq_len(.N), each = 3)]
  pct[, `:=`(percentile = rep(c(50, 90, 99), .N / 3), lat_ms = rep(c(1, 2, 5), .N / 3),
             source = "fio clat percentiles")]
  input$percentiles <- file.path(dir, "percentiles.csv.gz")
  dir.create(dir)
  fwrite(pct, input$percentiles)

  # the three plotting rules' plots, built, not drawn: the labels are ggplot2's build of them
  build <- function(fun, params) build_logged(fun, input, c(list(axes = axes), params))$plots
  storage <- build(build_sweep_plots, list())
  db <- build(build_db_plots, list(baseline = list()))
  kinds <- names(PLOT_TITLES)
  figures <- build(build_figures, list(analysis = list(plots = kinds)))
  expect_named(figures, kinds)
  expect_false(any(vapply(figures, is_skipped_plot, TRUE)))  # every kind made, none skipped
  plots <- c(storage, db, figures)
  labels <- lapply(stats::setNames(names(plots), names(plots)),
                   function(n) expect_readable(plots[[n]], n))

  # vs threads (storage rows): filesystem is the panel, threads the x axis,
  # the workload (the one other axis that varies) the legend; engine and
  # memory, NA in every storage row, nowhere
  expect_setequal(labels$throughput$legend, paste0("workload=", LONG_STORAGE))
  expect_setequal(labels$throughput$strips, c("filesystem=ext4", "filesystem=xfs"))
  expect_false(grepl("engine|memory", labels$throughput$subtitle))
  # too long to stand side by side: one line each, slanted
  expect_setequal(gsub("\n", " ", labels$jitter$ticks), sprintf("threads=%s, workload=%s", rep(c(1, 4), 2),
                  rep(LONG_STORAGE, each = 2)))
  # database plots: their own rows vary in engine and memory only; the rest
  # is said once in the subtitle, wrapped
  expect_setequal(labels$tps_memory$legend, c("innodb", "myrocks"))
  expect_length(labels$tps_memory$strips, 0)
  expect_match(gsub("\n", " ", labels$tps_memory$subtitle),
               sprintf("filesystem = xfs, threads = 4, workload = %s", LONG_OLTP), fixed = TRUE)
  expect_gt(length(lines_of(labels$tps_memory$subtitle)), 1)
  # engine ~ memory panels
  expect_setequal(labels$timeseries$strips,
                  c("engine=innodb", "engine=myrocks", "memory=64M", "memory=1G"))
  # both kinds of cells in one plot: a storage cell's label has no engine or
  # memory, a database cell's has them; wrapped to the strip of a panel in
  # two columns
  # each cell's throughput with its latency beside it: strips name the cell, then the figure
  measures <- c("throughput (transactions/s or IOPS)", "latency (ms), per second")
  strips <- unique(gsub("\n", " ", labels$timeseries_steady$strips))
  expect_true(all(measures %in% strips))
  strips <- setdiff(strips, measures)
  expect_length(strips, 12L)
  expect_true(sprintf("filesystem=ext4, threads=1, workload=%s", LONG_STORAGE[1]) %in% strips)
  expect_true(sprintf("engine=innodb, memory=64M, filesystem=xfs, threads=4, workload=%s",
                      LONG_OLTP) %in% strips)
  expect_true(all(nchar(lines_of(labels$timeseries_steady$strips)) <= strip_width(2)))
  expect_setequal(gsub("\n", " ", labels$violin$ticks), strips)
  expect_false(any(grepl("engine", labels$ci_vs_threads$legend[grepl("fileio", labels$ci_vs_threads$legend)])))

  # the image grows with the panels: 12 cells in 2 columns
  expect_gt(plot_size(figures$timeseries_steady)[["height"]], 5)
  expect_gt(drawn_size(figures$timeseries_steady)[["height"]], 550)
  expect_gt(drawn_size(figures$violin)[["height"]], 550)
})

test_that("labels skip NA and the axes given; strips and subtitles wrap", {
  dt <- data.table(engine = c("innodb", NA), memory = c("16M", NA),
                   workload = c("oltp", "fio"))
  expect_equal(configuration_label(dt, c("engine", "memory", "workload")),
               c("engine=innodb, memory=16M, workload=oltp", "workload=fio"))
  expect_equal(configuration_label(dt[2], c("engine", "memory")), "all")
  expect_equal(levels(cell_factor(dt, c("engine", "workload"))),
               c("engine=innodb, workload=oltp", "workload=fio"))
  strip <- axes_labeller(20)(data.frame(engine = c("innodb", NA), memory = c("16M", NA)))[[1]]
  expect_equal(strip, c("engine=innodb,\nmemory=16M", "no engine, memory"))
  expect_null(plot_subtitle(NULL))
  long <- plot_subtitle(strrep("word ", 40), "fixed")
  expect_true(all(nchar(lines_of(long)) <= 92))
  expect_match(long, "; fixed$")
  expect_null(fixed_axes_text(dt[2], c("engine", "memory")))
  expect_equal(fixed_axes_text(dt[2], c("engine", "workload")), "workload = fio")
})
