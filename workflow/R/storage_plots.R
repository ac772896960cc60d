# Plots of a sweep: throughput and latency against threads, and the spread of
# the per-second throughput in each cell (jittered points, boxplots).
#
# Snakemake: input summary, samples, provenance; output throughput, latency,
# jitter, boxplot; params axes; log.

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

# log2 threads axis; a lone thread count gets room around it, so error bars
# keep their width.
threads_axis <- function(threads) {
  breaks <- sort(unique(threads))
  limits <- if (length(breaks) == 1) c(breaks / 2, breaks * 2) else NULL
  scale_x_continuous(trans = "log2", breaks = breaks, labels = breaks,
                     limits = limits)
}

# Lines join thread counts; with one thread count there is nothing to join.
threads_line <- function(threads) {
  if (uniqueN(threads) > 1) geom_line()
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
    threads_line(dt$threads) +
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
    threads_line(dt$threads) +
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

# Per-second samples with a cell label from the axes that vary among them;
# filesystem becomes the facet when it varies, so it is left off the labels.
# Few cells get a line per axis, many one wrapped line each.
per_cell_data <- function(samples, axes) {
  dt <- copy(samples)
  varying <- varying_axes(dt, axes)
  facet <- "filesystem" %in% varying
  label_axes <- setdiff(varying, if (facet) "filesystem")
  n_cells <- n_combinations(dt, label_axes)
  many <- n_cells > 12
  dt[, cell := cell_factor(dt, label_axes, sep = if (many) ", " else "\n",
                           width = if (many) 30 else Inf)]
  setattr(dt, "label_axes", label_axes)
  setattr(dt, "facet", facet)
  setattr(dt, "many", many)
  dt
}

# Labels, scales and facets shared by the jitter and box plots.
per_cell_layers <- function(dt, axes) {
  list(
    scale_y_continuous(labels = thousands),
    expand_limits(y = 0),
    if (isTRUE(attr(dt, "facet"))) {
      facet_grid(~filesystem, scales = "free_x", space = "free_x",
                 labeller = axes_labeller())
    },
    labs(x = "cell", y = "IOPS (per-second samples)",
         subtitle = plot_subtitle(fixed_axes_text(dt, axes)))
  )
}

# Wider images for more cells, taller for slanted labels.
with_per_cell_size <- function(p, dt) {
  n <- nlevels(dt$cell)
  if (!isTRUE(attr(dt, "many"))) return(with_size(p, c(width = max(8, min(16, 1.1 * n)), height = 5)))
  with_size(p, c(width = max(8, min(16, 0.45 * n)), height = 6.5))
}

# Goes after theme_dbsweep(): many cells get one-line labels, slanted.
per_cell_theme <- function(dt) {
  if (isTRUE(attr(dt, "many"))) {
    theme(axis.text.x = element_text(angle = 45, hjust = 1))
  }
}

plot_jitter <- function(samples, axes, caption) {
  title <- "Per-second throughput by cell"
  dt <- per_cell_data(samples[!is.na(iops)], axes)
  if (nrow(dt) == 0) return(empty_plot(title, "no per-second samples", caption))
  dt[, rep := factor(rep)]
  p <- ggplot(dt, aes(cell, iops)) +
    geom_jitter(aes(colour = rep), width = 0.25, height = 0, size = 0.9,
                alpha = 0.6) +
    stat_summary(fun = median, fun.min = median, fun.max = median,
                 geom = "crossbar", width = 0.6, linewidth = 0.3) +
    scale_colour_dbsweep() +
    per_cell_layers(dt, axes) +
    labs(title = title, colour = "repetition", caption = caption) +
    theme_dbsweep() +
    per_cell_theme(dt) +
    theme(legend.position = if (nlevels(dt$rep) > 1) "bottom" else "none")
  with_per_cell_size(p, dt)
}

plot_boxplot <- function(samples, axes, caption) {
  title <- "Per-second throughput by cell"
  dt <- per_cell_data(samples[!is.na(iops)], axes)
  if (nrow(dt) == 0) return(empty_plot(title, "no per-second samples", caption))
  p <- ggplot(dt, aes(cell, iops)) +
    geom_boxplot(fill = OKABE_ITO[6], outlier.size = 0.7, width = 0.6) +
    per_cell_layers(dt, axes) +
    labs(title = title, caption = caption) +
    theme_dbsweep() +
    per_cell_theme(dt)
  with_per_cell_size(p, dt)
}

rule_plots <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)

  axes <- axes_param(params)
  summary <- read_summary(input[["summary"]], axes)
  samples <- read_samples(input[["samples"]], axes)
  caption <- caption_text(read_provenance(input[["provenance"]]))
  log_line("%d repetitions, %d per-second samples, axes: %s",
           nrow(summary), nrow(samples), paste(axes, collapse = ", "))

  plots <- list(
    throughput = plot_throughput(summary, axes, caption),
    latency = plot_latency(summary, axes, caption),
    jitter = plot_jitter(samples, axes, caption),
    boxplot = plot_boxplot(samples, axes, caption)
  )
  for (name in names(plots)) {
    save_plot(plots[[name]], output[[name]])
    log_line("%s -> %s", name, output[[name]])
  }
  invisible(plots)
}
