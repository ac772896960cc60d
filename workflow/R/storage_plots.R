# Plots of a sweep: throughput and latency against threads, and the spread of
# the per-second throughput in each cell (jittered points, boxplots).
#
# Snakemake: input summary, samples, provenance; output throughput, latency,
# jitter, boxplot; params axes; log.

# Adds what the vs-threads plots group by: threads (1 when the sweep has no
# threads axis) and series (the axes other than threads and filesystem, as one
# label). The legend title for series is attr(result, "series_title").
with_plot_columns <- function(dt, axes) {
  dt <- copy(dt)
  if (!"threads" %in% axes) dt[, threads := 1L]
  series_axes <- setdiff(axes, c("threads", "filesystem"))
  if (length(series_axes)) {
    label <- function(d) do.call(paste, c(unname(as.list(d)), sep = " / "))
    keys <- unique(dt[, ..series_axes])
    setorderv(keys, series_axes)
    dt[, series := factor(label(.SD), levels = unique(label(keys))),
       .SDcols = series_axes]
    title <- paste(series_axes, collapse = " / ")
  } else {
    dt[, series := factor("all")]
    title <- "series"
  }
  setattr(dt, "series_title", title)
  dt
}

# cell: a factor, in axis order, labelled with the values of the given axes
# (one line each when there are few cells, one line in all when many).
with_cell_label <- function(dt, axes, label_axes) {
  dt <- copy(dt)
  if (!length(label_axes)) {
    dt[, cell := factor("all")]
    return(dt)
  }
  cells <- unique(dt[, ..axes])
  setorderv(cells, axes)
  n_cells <- nrow(unique(cells[, ..label_axes]))
  sep <- if (n_cells > 12) " " else "\n"
  cells[, cell := do.call(paste, c(unname(as.list(.SD)), sep = sep)),
        .SDcols = label_axes]
  levels <- unique(cells$cell)
  dt <- dt[cells, on = axes]
  dt[, cell := factor(cell, levels = levels)]
  setattr(dt, "cell_sep", sep)
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

facet_by_filesystem <- function(axes, ...) {
  if ("filesystem" %in% axes) facet_wrap(~filesystem, ...) else NULL
}

series_legend <- function(dt) {
  if (nlevels(dt$series) <= 1) guides(colour = "none") else NULL
}

# Tool's final IOPS per cell: mean over repetitions, min and max.
throughput_data <- function(summary, axes) {
  dt <- with_plot_columns(summary[!is.na(iops)], axes)
  if (nrow(dt) == 0) return(data.table())
  out <- dt[, .(iops = mean(iops), iops_min = min(iops), iops_max = max(iops),
                reps = .N),
            by = c(setdiff(axes, "threads"), "threads", "series")]
  setattr(out, "series_title", attr(dt, "series_title"))
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
    facet_by_filesystem(axes) +
    series_legend(dt) +
    labs(title = title,
         subtitle = "mean over repetitions; bars show min and max",
         x = "threads", y = "IOPS", colour = attr(dt, "series_title"),
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
  out <- out[!is.na(lat_ms)]
  setattr(out, "series_title", attr(dt, "series_title"))
  out
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
    facet_by_filesystem(axes) +
    series_legend(dt) +
    labs(title = title,
         subtitle = "tool's average and 95th percentile latency, mean over repetitions",
         x = "threads", y = "latency (ms)", colour = attr(dt, "series_title"),
         linetype = "latency", shape = "latency", caption = caption) +
    theme_dbsweep()
}

# Per-second samples with a cell label; filesystem becomes the facet when it
# varies, so it is left off the labels.
per_cell_data <- function(samples, axes) {
  dt <- copy(samples)
  varying <- varying_axes(dt, axes)
  facet <- "filesystem" %in% varying
  label_axes <- setdiff(varying, if (facet) "filesystem")
  dt <- with_cell_label(dt, axes, label_axes)
  setattr(dt, "label_axes", label_axes)
  setattr(dt, "facet", facet)
  dt
}

# Labels, scales and facets shared by the jitter and box plots.
per_cell_layers <- function(dt, axes) {
  label_axes <- attr(dt, "label_axes")
  x_title <- if (length(label_axes)) {
    sprintf("cell (%s)", paste(label_axes, collapse = " / "))
  } else {
    "cell"
  }
  list(
    scale_y_continuous(labels = thousands),
    expand_limits(y = 0),
    if (isTRUE(attr(dt, "facet"))) {
      facet_grid(~filesystem, scales = "free_x", space = "free_x")
    },
    labs(x = x_title, y = "IOPS (per-second samples)",
         subtitle = fixed_axes_text(dt, axes))
  )
}

# Goes after theme_dbsweep(): many cells get one-line labels, slanted.
per_cell_theme <- function(dt) {
  if (identical(attr(dt, "cell_sep"), " ")) {
    theme(axis.text.x = element_text(angle = 45, hjust = 1))
  }
}

plot_jitter <- function(samples, axes, caption) {
  title <- "Per-second throughput by cell"
  dt <- per_cell_data(samples[!is.na(iops)], axes)
  if (nrow(dt) == 0) return(empty_plot(title, "no per-second samples", caption))
  dt[, rep := factor(rep)]
  ggplot(dt, aes(cell, iops)) +
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
}

plot_boxplot <- function(samples, axes, caption) {
  title <- "Per-second throughput by cell"
  dt <- per_cell_data(samples[!is.na(iops)], axes)
  if (nrow(dt) == 0) return(empty_plot(title, "no per-second samples", caption))
  ggplot(dt, aes(cell, iops)) +
    geom_boxplot(fill = OKABE_ITO[6], outlier.size = 0.7, width = 0.6) +
    per_cell_layers(dt, axes) +
    labs(title = title, caption = caption) +
    theme_dbsweep() +
    per_cell_theme(dt)
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
