# Open-loop cells (sysbench --rate, study 9): the 99th percentile latency per
# second for each thread count, time in sysbench's queue included; the queue
# length over time; and a table of target vs achieved rate per repetition in
# which a run that fell short of its target is marked, not dropped.
#
# Snakemake: input summary, samples, provenance; output table_csv, table_md,
# p99, queue; params axes; log.
#
# Rows without a rate (closed-loop cells in the same study) are left out. A
# repetition is short when collect marked it (rate_short = 1): fewer events
# than the target brings beyond Poisson noise, or a queue that kept growing.

OPEN_LOOP_SUMMARY_COLUMNS <- c("rate", "rate_achieved", "queue_max",
                               "queue_end", "rate_short")
OPEN_LOOP_SAMPLES_COLUMNS <- c("queue", "lat_p99_ms")
SHORT_LABEL <- "short of its rate"

# The summary's open-loop repetitions.
open_loop_rows <- function(summary) {
  summary[!is.na(rate)]
}

# Rate columns of a rate given as a share of the host's calibrated throughput
# (rate: 80%): the percentage and that throughput, beside the rate they made.
CALIBRATED_RATE_COLUMNS <- c("rate_percent", "rate_calibrated_tps")

# Per repetition: target and achieved rate, the achieved share, the queue, the
# run's 99th percentile latency and whether it fell short of its target; with
# rate_percent and rate_calibrated_tps first when some cell's rate is a share of
# its calibration.
open_loop_table <- function(summary, axes) {
  cols <- c(axes, "rep")
  calibrated <- intersect(CALIBRATED_RATE_COLUMNS, names(summary))
  if (length(calibrated) == 0 || all(is.na(summary[[calibrated[1]]]))) {
    calibrated <- character()
  }
  dt <- summary[, c(cols, calibrated, "rate", "rate_achieved", "queue_max", "queue_end",
                    "lat_p99_ms", "lat_mean_ms", "rate_short"), with = FALSE]
  dt[, achieved_pct := 100 * rate_achieved / rate]
  dt[, status := fifelse(rate_short == 1, SHORT_LABEL, "kept up")]
  dt[, rate_short := NULL]
  setcolorder(dt, c(cols, calibrated, "rate", "rate_achieved", "achieved_pct"))
  order_by_axes(dt, cols)
  dt[]
}

# samples of open-loop repetitions with .threads (the thread count, marked
# when any of its repetitions was short), .line (one per repetition) and the
# panel axes as factors.
open_loop_series <- function(samples, summary, axes) {
  keys <- c(axes, "rep")
  dt <- samples[summary[, c(keys, "rate_short"), with = FALSE], on = keys,
                nomatch = NULL]
  if (nrow(dt) == 0) return(dt)
  group <- setdiff(axes, "threads")
  dt[, .short := any(rate_short == 1), by = c(group, "threads")]
  levels <- axis_levels(dt$threads, "threads")
  labels <- unique(dt[, .(threads = as.character(threads), .short)])
  labels[, label := fifelse(.short, paste0(threads, " (", SHORT_LABEL, ")"), threads)]
  labels <- labels[match(levels, threads)]
  dt[, .threads := factor(labels$label[match(as.character(threads), labels$threads)],
                          levels = labels$label)]
  dt[, .line := interaction(.threads, rep, drop = TRUE)]
  dt[]
}

# Panels: the axes other than threads that vary among open-loop cells.
open_loop_facets <- function(dt, axes) {
  varying_axes(dt, setdiff(axes, "threads"))
}

plot_open_loop <- function(samples, summary, axes, caption, column, title, y_label,
                           log_y = FALSE) {
  dt <- open_loop_series(samples, summary, axes)
  if (nrow(dt) == 0 || all(is.na(dt[[column]]))) {
    return(empty_plot(title, sprintf("no %s in the open-loop samples", column),
                      caption))
  }
  facets <- open_loop_facets(dt, axes)
  fixed <- fixed_axes_text(dt, setdiff(axes, "threads"))
  rates <- paste(format_number(sort(unique(summary$rate))), collapse = ", ")
  p <- ggplot(dt[!is.na(get(column))],
              aes(second, .data[[column]], colour = .threads, group = .line)) +
    geom_line(linewidth = 0.5) +
    geom_point(size = 0.8) +
    scale_colour_dbsweep(name = "threads") +
    labs(title = title,
         subtitle = plot_subtitle(sprintf("target rate %s/s", rates), fixed),
         x = "time (s)", y = y_label, caption = caption) +
    theme_dbsweep()
  if (log_y) {
    p <- p + scale_y_log10(labels = thousands)
  } else {
    p <- p + scale_y_continuous(labels = thousands)
  }
  panels <- panel_layout(dt, facets)
  with_panel_rows(p + panels$facet, panels$rows)
}

plot_p99 <- function(samples, summary, axes, caption) {
  plot_open_loop(samples, summary, axes, caption, "lat_p99_ms",
                 "99th percentile latency per second, time in the queue included",
                 "p99 latency (ms, log scale)", log_y = TRUE)
}

plot_queue <- function(samples, summary, axes, caption) {
  plot_open_loop(samples, summary, axes, caption, "queue",
                 "sysbench event queue length", "queued events")
}

rule_openloop <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)

  axes <- axes_param(params)
  summary <- open_loop_rows(read_table(input[["summary"]], axes,
                                       c(SUMMARY_COLUMNS, OPEN_LOOP_SUMMARY_COLUMNS)))
  samples <- read_table(input[["samples"]], axes,
                        c(SAMPLES_COLUMNS, OPEN_LOOP_SAMPLES_COLUMNS))
  caption <- caption_text(read_provenance(input[["provenance"]]))
  table <- open_loop_table(summary, axes)
  log_line("%d open-loop repetitions, %d short of their rate", nrow(table),
           sum(table$status == SHORT_LABEL))

  write_csv(table, output[["table_csv"]])
  preamble <- c("# Open loop: target vs achieved rate",
                "",
                paste("Achieved = the tool's events per second over its run.",
                      "Short of its rate: fewer events than the target brings",
                      "(by over 5% and over 3 sd of Poisson arrivals), or a queue",
                      "that ended longer than it started and than 0.1 s of arrivals.",
                      "Latency is sysbench's, from arrival (queue time included)."))
  write_md_table(table, output[["table_md"]], preamble = preamble, caption = caption)

  plots <- list(p99 = plot_p99(samples, summary, axes, caption),
                queue = plot_queue(samples, summary, axes, caption))
  for (name in names(plots)) {
    save_plot(plots[[name]], output[[name]])
    log_line("%s -> %s", name, output[[name]])
  }
  invisible(plots)
}
