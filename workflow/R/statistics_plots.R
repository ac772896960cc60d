# Plots drawn from the statistics (statistics.R), storage and
# database cells alike: the per-second time series with the steady-state
# window and stalls, violins of the per-second throughput, throughput and
# latency against threads with confidence ribbons, a heatmap of the ratios to
# a baseline, and latency percentile curves.
#
# Snakemake: input summary, samples, provenance, steady_state, cell_stats_csv,
# comparisons_csv (the statistics rule's); output one PNG per kind the study
# chose (params$analysis$plots) and skipped (skipped_plots.csv: plot, reason);
# params axes, analysis; log.
#
# A kind the data cannot support (no threads axis for ci_vs_threads, ...) is
# drawn as an image saying why and listed in skipped_plots.csv, never an error.

PLOT_TITLES <- list(
  timeseries_steady = "Per-second throughput and latency, steady-state window and stalls",
  violin = "Per-second throughput by cell",
  ci_vs_threads = "Median throughput and latency vs threads",
  ratio_heatmap = "Ratio to the baseline",
  latency_percentiles = "Latency percentiles"
)

# Units of the metrics as axis and panel labels.
METRIC_LABELS <- c(tps = "transactions/s", iops = "IOPS (I/O per s)",
                   lat_ms = "latency, per-second mean (ms)",
                   lat_p95_ms = "latency, per-second 95th percentile (ms)")

# More panels than this make an unreadable time series.
MAX_PANELS <- 36L

metric_label <- function(metric) {
  out <- METRIC_LABELS[metric]
  ifelse(is.na(out), metric, out)
}

# A label per cell from the axes that vary among dt's rows (in reading
# order, NA left out), wrapped to `width`: a factor.
cell_labels <- function(dt, axes, width = Inf) {
  cell_factor(dt, varying_axes(dt, axes), width = width)
}

# ---------------------------------------------------------------------------

# Per second, each cell's throughput and, beside it on the same time axis, its
# latency (the per-second mean, fio, or 95th percentile, sysbench): one row of
# panels per cell, the steady-state window shaded across both, stalls marked
# on the throughput. A cell without per-second latency has its throughput only.
plot_timeseries_steady <- function(dt, windows, axes, caption, spans = data.table()) {
  if (nrow(dt) == 0) return(skipped_plot("no per-second throughput samples"))
  dt <- copy(dt)
  if (!"latency" %in% names(dt)) dt[, latency := NA_real_]
  with_latency <- any(!is.na(dt$latency))
  ncol <- if (with_latency || uniqueN(dt[, ..axes]) > 3) 2 else 1
  dt[, cell := cell_labels(dt, axes, strip_width(ncol))]
  if (nlevels(dt$cell) > MAX_PANELS) {
    return(skipped_plot(sprintf(
      "%d cells are too many panels for one image (at most %d); steady_state.csv lists every window",
      nlevels(dt$cell), MAX_PANELS)))
  }
  keys <- c(axes, "rep")
  w <- copy(windows)
  w[dt[, .(cell = cell[1L]), by = keys], cell := i.cell, on = keys]
  dt[w, thr := i.stall_threshold, on = keys]
  dt[w, `:=`(ws = i.window_start, we = i.window_end), on = keys]
  stalls <- dt[second >= ws & second <= we & throughput < thr]
  dt[, rep := factor(rep)]
  w[, rep := factor(rep)]
  metrics <- unique(dt$throughput_metric)
  throughput_label <- if (length(metrics) == 1) metric_label(metrics) else "throughput (transactions/s or IOPS)"
  measures <- c(throughput_label, "latency (ms), per second")
  long <- rbind(dt[, .(cell, rep, second, value = throughput, measure = measures[1])],
                dt[!is.na(latency), .(cell, rep, second, value = latency, measure = measures[2])])
  long[, measure := factor(measure, levels = measures)]
  stalls[, measure := factor(measures[1], levels = measures)]
  p <- ggplot(long, aes(second, value)) +
    geom_rect(data = w, aes(xmin = window_start - 0.5, xmax = window_end + 0.5,
                            ymin = -Inf, ymax = Inf, fill = "steady-state window"),
              inherit.aes = FALSE, alpha = 0.12) +
    geom_line(aes(colour = rep, group = rep), linewidth = 0.35) +
    geom_point(data = stalls, aes(y = throughput, shape = "stall"), colour = "#D55E00", size = 1.6) +
    scale_fill_manual(values = c("steady-state window" = "#0072B2"), name = NULL) +
    scale_shape_manual(values = c(stall = 16), name = NULL,
                       labels = "stall (below the stall share of the median)") +
    scale_colour_dbsweep() +
    scale_y_continuous(labels = thousands) +
    expand_limits(y = 0) +
    facet_wrap(if (with_latency) vars(cell, measure) else vars(cell), scales = "free_y", ncol = ncol,
               labeller = label_value) +
    labs(title = PLOT_TITLES$timeseries_steady,
         subtitle = plot_subtitle(
           sprintf("%d repetition(s), %d stalled second(s); %d repetition(s) never reached steady state",
                   nrow(windows), nrow(stalls), sum(windows$steady %in% FALSE)),
           if (with_latency) "latency beside: each second's mean (fio) or p95 (sysbench)",
           fixed_axes_text(dt, axes)),
         x = "second of the measured window (s)",
         y = if (with_latency) "per-second value (unit in the panel strip)" else throughput_label,
         colour = "repetition", caption = caption) +
    theme_dbsweep()
  if (!nrow(stalls)) p <- p + guides(shape = "none")
  if (nlevels(dt$rep) <= 1) p <- p + guides(colour = "none")
  p <- with_event_spans(p, spans_for(spans, dt, axes, "cell"))
  lines <- max(1L, lengths(strsplit(levels(dt$cell), "\n", fixed = TRUE)))
  if (!with_latency) return(with_panel_rows(p, ceiling(nlevels(dt$cell) / ncol), per_row = 1.3 + 0.2 * lines))
  # two strip lines (cell, figure) per row of panels
  rows <- nlevels(dt$cell)
  setattr(p, "panel_rows", rows)
  with_size(p, c(width = 8, height = plot_height(rows, per_row = 1.9 + 0.2 * lines)))
}

plot_violin <- function(win, axes, caption) {
  if (nrow(win) == 0) return(skipped_plot("no per-second throughput samples"))
  dt <- copy(win)
  dt[, cell := cell_labels(dt, axes, width = 45)]
  dt[, cell := factor(cell, levels = rev(levels(cell)))]  # first cell on top
  dt[, metric := factor(metric_label(throughput_metric))]
  p <- ggplot(dt, aes(cell, throughput)) +
    geom_violin(fill = OKABE_ITO[6], colour = "grey30", scale = "width", linewidth = 0.3) +
    geom_boxplot(width = 0.12, outlier.shape = NA, fill = "white", linewidth = 0.3) +
    scale_y_continuous(labels = thousands) +
    expand_limits(y = 0) +
    labs(title = PLOT_TITLES$violin,
         subtitle = plot_subtitle("per-second values in the steady-state windows; boxes: quartiles",
                                  fixed_axes_text(dt, axes)),
         x = NULL, y = if (nlevels(dt$metric) == 1) levels(dt$metric) else "per-second throughput",
         caption = caption) +
    coord_flip() +
    theme_dbsweep()
  if (nlevels(dt$metric) > 1) {
    p <- p + facet_wrap(~metric, scales = "free", ncol = 1)
  }
  # one violin per cell, stacked: the image grows with the cells
  cells <- nrow(unique(dt[, .(metric, cell)]))
  lines <- max(1L, lengths(strsplit(levels(dt$cell), "\n", fixed = TRUE)))
  with_size(p, c(width = 8, height = min(30, max(5, 2.6 + 0.35 * cells * max(1, lines * 0.6)))))
}

plot_ci_vs_threads <- function(cells, axes, caption) {
  if (!"threads" %in% axes || uniqueN(cells$threads) < 2) {
    return(skipped_plot("needs a threads axis with two values or more"))
  }
  dt <- copy(cells)
  series_axes <- varying_axes(dt, setdiff(axes, "threads"))
  dt[, series := cell_factor(dt, series_axes, width = 40)]
  dt[, panel := factor(metric_label(metric), levels = unique(metric_label(
    c(THROUGHPUT_METRICS, LATENCY_METRICS))))]
  dt[, panel := droplevels(panel)]
  p <- ggplot(dt, aes(threads, median, colour = series, fill = series, group = series)) +
    geom_ribbon(aes(ymin = ci_low, ymax = ci_high), alpha = 0.2, colour = NA) +
    geom_line() +
    geom_point(size = 1.8) +
    scale_x_continuous(trans = "log2", breaks = sort(unique(dt$threads))) +
    scale_y_continuous(labels = thousands) +
    expand_limits(y = 0) +
    scale_colour_dbsweep() +
    scale_fill_dbsweep() +
    facet_wrap(~panel, scales = "free_y", ncol = 1) +
    labs(title = PLOT_TITLES$ci_vs_threads,
         subtitle = plot_subtitle("median of the per-repetition medians; ribbons: 95% bootstrap CI",
                                  fixed_axes_text(dt, setdiff(axes, "threads"))),
         x = "threads (log2 scale)", y = "median per-second value (unit in the panel title)",
         colour = NULL, fill = NULL, caption = caption) +
    theme_dbsweep()
  p <- p + if (nlevels(dt$series) <= 1) {
    guides(colour = "none", fill = "none")
  } else {
    legend_in_columns(levels(dt$series), c("colour", "fill"))
  }
  legend_rows <- if (nlevels(dt$series) > 1) ceiling(nlevels(dt$series) / 2) else 0
  with_size(p, c(width = 8, height = min(30, 2 + 2.6 * nlevels(dt$panel) + 0.25 * legend_rows)))
}

plot_ratio_heatmap <- function(comparisons, cells, axes, caption) {
  if (nrow(comparisons) == 0) {
    return(skipped_plot("no axis with two values or more to compare with a baseline"))
  }
  cmp <- comparisons[metric %in% THROUGHPUT_METRICS]
  compared <- unique(cmp$axis)[1]
  cmp <- cmp[cmp$axis == compared]
  x_axis <- row_axis(cmp, axes, compared)
  if (is.null(x_axis)) {
    return(skipped_plot(sprintf("needs a second axis that varies besides %s", compared)))
  }
  facets <- setdiff(varying_axes(cmp[, ..axes], axes), c(compared, x_axis))
  base <- cmp$baseline[1]
  dt <- with_axis_factors(cmp, c(x_axis, facets))
  dt[, y := factor(paste0(axis_value, "/", base),
                   levels = paste0(setdiff(axis_levels(cmp$axis_value, compared), base), "/", base))]
  dt[, label := paste0(format_number(ratio), ifelse(verdict %in% VERDICT_NOISE, "\n~noise", ""))]
  limit <- max(abs(log2(dt$ratio[is.finite(dt$ratio) & dt$ratio > 0])), 0.1)
  p <- ggplot(dt, aes(.data[[x_axis]], y, fill = log2(ratio))) +
    geom_tile(colour = "white") +
    geom_text(aes(label = label), size = 3) +
    scale_fill_distiller(palette = "PuOr", limits = c(-limit, limit), direction = 1,
                         labels = function(b) format_number(2^b),
                         name = sprintf("ratio to %s = %s", compared, base)) +
    labs(title = sprintf("%s: %s", PLOT_TITLES$ratio_heatmap, compared),
         subtitle = plot_subtitle(sprintf(paste("median %s / the %s = %s cell's; ~noise: the 95%% CI of",
                                                "the ratio contains 1"), cmp$metric[1], compared, base),
                                  fixed_axes_text(cmp, setdiff(axes, c(compared, x_axis)))),
         x = x_axis, y = sprintf("%s (ratio)", compared), caption = caption) +
    guides(fill = guide_colourbar(barwidth = grid::unit(14, "lines"))) +
    theme_dbsweep() +
    theme(panel.grid = element_blank())
  panels <- panel_layout(dt, facets)
  with_panel_rows(p + panels$facet, panels$rows, per_row = 2.2)
}

plot_latency_percentiles <- function(percentiles, axes, caption) {
  if (is.null(percentiles) || nrow(percentiles) == 0) {
    return(skipped_plot(paste("no latency percentiles: none of this study's runs reported them",
                              "(fio does by itself, sysbench with `histogram: true`)")))
  }
  dt <- percentiles[percentile > 0 & percentile < 100 & lat_ms > 0]
  if (nrow(dt) == 0) return(skipped_plot("no latency percentile below 100%"))
  dt[, cell := cell_labels(dt, axes, width = 40)]
  dt[, rep := factor(rep)]
  p <- ggplot(dt, aes(percentile, lat_ms, colour = cell, linetype = source,
                 group = interaction(cell, rep, source))) +
    geom_line() +
    scale_x_continuous(trans = scales_nines(), breaks = c(50, 90, 99, 99.9, 99.99)) +
    scale_y_log10() +
    scale_colour_dbsweep() +
    labs(title = PLOT_TITLES$latency_percentiles,
         subtitle = plot_subtitle(percentile_sources(dt$source), fixed_axes_text(dt, axes)),
         x = "percentile (%, spaced by nines)", y = "latency (ms, log scale)", colour = NULL,
         linetype = NULL, caption = caption) +
    legend_in_columns(levels(dt$cell)) +
    theme_dbsweep()
  legend_rows <- ceiling(nlevels(dt$cell) / 2)
  with_size(p, c(width = 8, height = min(30, max(5, 4 + 0.3 * legend_rows))))
}

# What the curves were read from, as the tools' adapters name it (percentiles'
# source column: "fio clat percentiles", "sysbench histogram"), only those
# this study's rows have.
percentile_sources <- function(sources) {
  sources <- unique(stats::na.omit(as.character(sources)))
  if (!length(sources)) return("the tools' own latency percentiles over each whole run")
  sprintf("over each repetition's whole run, from %s", paste(sources, collapse = " and "))
}

# The x transformation of percentile curves: -log10(1 - p/100), so that 90,
# 99, 99.9 are equally spaced.
scales_nines <- function() {
  scales::trans_new("nines", function(p) -log10(1 - p / 100),
                    function(x) 100 * (1 - 10^-x))
}

# ---------------------------------------------------------------------------

rule_figures <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)

  plots <- build_figures(input, params)
  kinds <- names(plots)
  skipped <- save_plots(plots, output, attr(plots, "caption"), PLOT_TITLES)
  sweep <- input[["sweep_skipped"]]  # rule plots' own (storage cells), listed here too
  if (length(sweep) && file.exists(sweep) && file.size(sweep) > 1) {
    skipped <- rbind(skipped, fread(sweep, colClasses = "character"))
  }
  write_csv(skipped, output[["skipped"]])
  for (k in kinds) {
    log_line("%s -> %s%s", k, output[[k]],
             if (k %in% skipped$plot) paste(" (skipped:", skipped[plot == k, reason], ")") else "")
  }
  invisible(plots)
}

# rule_figures' plots of the kinds the study asks for (attr "caption": the caption of the notes saying
# why a plot was skipped), from the study's tables (`input`), built but not drawn: drawing is most of
# the rule's time, and the tests read these objects for each shape of study.
build_figures <- function(input, params) {
  axes <- axes_param(params)
  settings <- stats_settings(params[["analysis"]])
  kinds <- unlist(params[["analysis"]][["plots"]])
  if (is.null(kinds)) kinds <- names(PLOT_TITLES)
  summary <- read_summary(input[["summary"]], axes)
  samples <- read_samples(input[["samples"]], axes)
  kept <- per_second_cells(summary, samples, axes)
  summary <- kept$summary
  samples <- kept$samples
  caption <- caption_text(read_provenance(input[["provenance"]]))
  windows <- read_table(input[["steady_state"]], axes, "rep")
  cells <- read_table(input[["cell_stats_csv"]], axes)
  comparisons <- if (file.size(input[["comparisons_csv"]]) > 1) {
    read_table(input[["comparisons_csv"]], axes)
  } else {
    data.table()
  }
  percentiles <- if (!is.null(input[["percentiles"]])) {
    read_table(input[["percentiles"]], axes, c("rep", "percentile", "lat_ms", "source"))
  }
  compact <- cell_series(samples, summary, axes)
  meta <- compact$cells[match(compact$series$.cell, compact$cells$.cell),
                        c(axes, "throughput_metric"), with = FALSE]
  dt <- cbind(meta, compact$series[, .(rep, second, throughput, latency)])[!is.na(throughput)]
  win <- window_samples(dt, windows, c(axes, "rep"), "throughput")

  draw <- list(
    timeseries_steady = function() {
      plot_timeseries_steady(dt, windows, axes, caption, event_spans(read_events(input[["events"]], axes), axes))
    },
    violin = function() plot_violin(win, axes, caption),
    ci_vs_threads = function() plot_ci_vs_threads(cells, axes, caption),
    ratio_heatmap = function() plot_ratio_heatmap(comparisons, cells, axes, caption),
    latency_percentiles = function() plot_latency_percentiles(percentiles, axes, caption)
  )
  structure(lapply(stats::setNames(kinds, kinds), function(k) draw[[k]]()), caption = caption)
}
