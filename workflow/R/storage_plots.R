# Plots of a sweep: throughput and latency against threads, and the spread of
# the per-second throughput in each cell (jittered points, boxplots).
#
# Snakemake: input summary, samples, provenance; output throughput, latency,
# jitter, boxplot, skipped (the plots that cannot say anything for this
# study, and why: merged into skipped_plots.csv by rule figures); params axes;
# log.

# Adds what the vs-threads plots group by: threads (1 when the sweep has no
# threads axis) and series (the axes other than threads and filesystem that
# vary among these rows, labelled "workload=rndrd, block=16k").
with_plot_columns <- function(dt, axes) {
  dt <- copy(dt)
  if (!"threads" %in% axes) dt[, threads := 1L]
  series_axes <- varying_axes(dt, setdiff(axes, c("threads", "filesystem")))
  dt[, series := cell_factor(dt, series_axes, width = 40)]
  dt
}

# log2 threads axis (the vs-threads plots are drawn for two thread counts or
# more: sweep_plots()).
threads_axis <- function(threads) {
  breaks <- sort(unique(threads))
  scale_x_continuous(trans = "log2", breaks = breaks, labels = breaks)
}

# A panel per filesystem when the rows have more than one.
facet_by_filesystem <- function(dt, axes) {
  if ("filesystem" %in% varying_axes(dt, axes)) panel_layout(dt, "filesystem")$facet
}

series_legend <- function(dt) {
  if (nlevels(dt$series) <= 1) guides(colour = "none") else legend_in_columns(levels(dt$series))
}

# The subtitle of the vs-threads plots: the note and the axes fixed in every row.
threads_subtitle <- function(dt, axes, note) {
  plot_subtitle(note, fixed_axes_text(dt, setdiff(axes, "threads")))
}

# Tool's final IOPS per cell: mean over repetitions, min and max.
throughput_data <- function(summary, axes) {
  dt <- with_plot_columns(summary[!is.na(iops)], axes)
  if (nrow(dt) == 0) return(data.table())
  out <- dt[, .(iops = mean(iops), iops_min = min(iops), iops_max = max(iops),
                reps = .N),
            by = c(setdiff(axes, "threads"), "threads", "series")]
  out
}

plot_throughput <- function(summary, axes, caption) {
  dt <- throughput_data(summary, axes)
  title <- "Throughput vs threads"
  if (nrow(dt) == 0) return(empty_plot(title, "no IOPS figures", caption))
  ggplot(dt, aes(threads, iops, colour = series, group = series)) +
    geom_line() +
    geom_point(size = 2) +
    geom_errorbar(aes(ymin = iops_min, ymax = iops_max), width = 0.15) +
    threads_axis(dt$threads) +
    scale_y_continuous(limits = c(0, NA), labels = thousands) +
    scale_colour_dbsweep() +
    facet_by_filesystem(dt, axes) +
    series_legend(dt) +
    labs(title = title,
         subtitle = threads_subtitle(dt, axes, "mean over repetitions; bars show min and max"),
         x = "threads", y = "IOPS", colour = NULL,
         caption = caption) +
    theme_dbsweep()
}

# Tool's final average and 95th percentile latency per cell, long format.
latency_data <- function(summary, axes) {
  dt <- with_plot_columns(summary, axes)
  by <- c(setdiff(axes, "threads"), "threads", "series")
  out <- dt[, .(avg = mean_or_na(lat_mean_ms), p95 = mean_or_na(lat_p95_ms)),
            by = by]
  out <- melt(out, id.vars = by, measure.vars = c("avg", "p95"),
              variable.name = "statistic", value.name = "lat_ms")
  out[!is.na(lat_ms)]
}

plot_latency <- function(summary, axes, caption) {
  dt <- latency_data(summary, axes)
  title <- "Latency vs threads"
  if (nrow(dt) == 0) return(empty_plot(title, "no latency figures", caption))
  ggplot(dt, aes(threads, lat_ms, colour = series, linetype = statistic,
                 shape = statistic, group = interaction(series, statistic))) +
    geom_line() +
    geom_point(size = 2) +
    threads_axis(dt$threads) +
    scale_y_continuous(limits = c(0, NA)) +
    scale_colour_dbsweep() +
    scale_linetype_manual(values = c(avg = "solid", p95 = "dashed"), drop = FALSE) +
    scale_shape_manual(values = c(avg = 16, p95 = 17), drop = FALSE) +
    facet_by_filesystem(dt, axes) +
    series_legend(dt) +
    labs(title = title,
         subtitle = threads_subtitle(dt, axes,
                                     "tool's average and 95th percentile latency, mean over repetitions"),
         x = "threads", y = "latency (ms)", colour = NULL,
         linetype = "latency", shape = "latency", caption = caption) +
    theme_dbsweep()
}

# Per-second samples with a cell label from the axes that vary among them
# ("threads=4, workload=rndrd", wrapped), the first cell on top; filesystem
# becomes the facet when it varies, so it is left off the labels. The cells
# are rows of the plot: attr "size" is an image as tall as they need.
per_cell_data <- function(samples, axes) {
  dt <- copy(samples)
  varying <- varying_axes(dt, axes)
  facet <- "filesystem" %in% varying
  label_axes <- setdiff(varying, if (facet) "filesystem")
  dt[, cell := cell_factor(dt, label_axes, width = 40)]
  dt[, cell := factor(cell, levels = rev(levels(cell)))]
  rows <- n_combinations(dt, c(label_axes, if (facet) "filesystem"))
  lines <- max(1L, lengths(strsplit(levels(dt$cell), "\n", fixed = TRUE)))
  setattr(dt, "label_axes", label_axes)
  setattr(dt, "facet", facet)
  setattr(dt, "size", c(width = 8, height = min(30, max(5, 2.4 + rows * (0.2 + 0.2 * lines)))))
  dt
}

# Labels, scales and facets shared by the jitter and box plots.
per_cell_layers <- function(dt, axes) {
  list(
    scale_x_continuous(labels = thousands),
    expand_limits(x = 0),
    if (isTRUE(attr(dt, "facet"))) {
      facet_grid(filesystem ~ ., scales = "free_y", space = "free_y",
                 labeller = axes_labeller())
    },
    labs(y = NULL, x = "IOPS (per-second samples)",
         subtitle = plot_subtitle(fixed_axes_text(dt, axes)))
  )
}

plot_jitter <- function(samples, axes, caption) {
  title <- "Per-second throughput by cell"
  dt <- per_cell_data(samples[!is.na(iops)], axes)
  if (nrow(dt) == 0) return(empty_plot(title, "no per-second samples", caption))
  dt[, rep := factor(rep)]
  p <- ggplot(dt, aes(iops, cell)) +
    geom_jitter(aes(colour = rep), width = 0, height = 0.25, size = 0.9,
                alpha = 0.6) +
    stat_summary(fun = median, fun.min = median, fun.max = median, orientation = "y",
                 geom = "crossbar", width = 0.6, linewidth = 0.3) +
    scale_colour_dbsweep() +
    per_cell_layers(dt, axes) +
    labs(title = title, colour = "repetition", caption = caption) +
    theme_dbsweep() +
    theme(legend.position = if (nlevels(dt$rep) > 1) "bottom" else "none")
  with_size(p, attr(dt, "size"))
}

plot_boxplot <- function(samples, axes, caption) {
  title <- "Per-second throughput by cell"
  dt <- per_cell_data(samples[!is.na(iops)], axes)
  if (nrow(dt) == 0) return(empty_plot(title, "no per-second samples", caption))
  p <- ggplot(dt, aes(iops, cell)) +
    geom_boxplot(fill = OKABE_ITO[6], outlier.size = 0.7, width = 0.6, orientation = "y") +
    per_cell_layers(dt, axes) +
    labs(title = title, caption = caption) +
    theme_dbsweep()
  with_size(p, attr(dt, "size"))
}

rule_plots <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)

  plots <- build_sweep_plots(input, params)
  skipped <- save_plots(plots, output, attr(plots, "caption"))
  skipped[, plot := vapply(plot, function(k) tools::file_path_sans_ext(basename(output[[k]])), "")]
  if (!is.null(output[["skipped"]])) write_csv(skipped, output[["skipped"]])
  for (name in names(plots)) {
    log_line("%s -> %s%s", name, output[[name]], if (is_skipped_plot(plots[[name]])) {
      paste(" (skipped:", plots[[name]]$reason, ")")
    } else {
      ""
    })
  }
  invisible(plots)
}

# rule_plots' four plots of the sweep whose tables are `input` (attr "caption": the caption of the notes
# saying why a plot was skipped), built but not drawn: drawing is most of the rule's time, and the tests
# read these objects for each shape of sweep.
build_sweep_plots <- function(input, params) {
  axes <- axes_param(params)
  summary <- read_summary(input[["summary"]], axes)
  samples <- read_samples(input[["samples"]], axes)
  caption <- caption_text(read_provenance(input[["provenance"]]))
  log_line("%d repetitions, %d per-second samples, axes: %s",
           nrow(summary), nrow(samples), paste(axes, collapse = ", "))
  structure(sweep_plots(summary, samples, axes, caption), caption = caption)
}

# The four plots of a sweep, or why one cannot say anything for this study:
# the vs-threads plots need two thread counts or more (one is a lone point),
# the per-cell spread plots two cells or more (one cell's spread is the
# violin's and cell_stats' sd, p5 and p95).
sweep_plots <- function(summary, samples, axes, caption) {
  threads <- if ("threads" %in% axes) uniqueN(stats::na.omit(summary$threads)) else 1L
  cells <- nrow(unique(summary[, ..axes]))
  one_count <- skipped_plot(sprintf(
    "needs a threads axis with two values or more (this study has %d thread count)", threads))
  one_cell <- skipped_plot(paste("one cell: its per-second throughput is in violin.png and in",
                                 "cell_stats (sd, p5, p95)"))
  list(
    throughput = if (threads < 2) one_count else plot_throughput(summary, axes, caption),
    latency = if (threads < 2) one_count else plot_latency(summary, axes, caption),
    jitter = if (cells < 2) one_cell else plot_jitter(samples, axes, caption),
    boxplot = if (cells < 2) one_cell else plot_boxplot(samples, axes, caption)
  )
}
