# Plots of database studies (tool sysbench): throughput, IO per transaction
# and CPU against memory per engine (study 4), the datadir size over time,
# the spread of the per-second throughput, and per-second time series with
# stalls marked (study 5's drops to 0 at binary log rotation).
#
# Snakemake: input summary, samples, system, counters, provenance,
# steady_state (the statistics rule's windows and stall thresholds); output
# tps_memory, io_per_txn, cpu, datadir, jitter_memory, boxplot_memory,
# timeseries; params axes, analysis (stall_share, for the legend); log.
#
# Rows of other tools (storage cells in the same study) are left out. A plot
# the study cannot give (e.g. no memory axis) is still written, saying
# "not applicable: ..." on the image.

STALL_COLOUR <- "#D55E00"
# Repetition lines of the time series: the palette without the stall colour.
REP_COLOURS <- c("#0072B2", "#009E73", "#56B4E9", "#CC79A7", "#000000",
                 "#E69F00")


# Rows of a per-second table that belong to the summary's repetitions.
database_part <- function(dt, summary, axes) {
  keys <- c(axes, "rep")
  dt[unique(summary[, ..keys]), on = keys, nomatch = NULL]
}

# How the plots against memory lay out a study: colour by engine (one colour
# when there is no engine axis), a panel per combination of the other axes
# that vary; the axes that do not vary go in the subtitle.
memory_layout <- function(dt, axes) {
  colour <- intersect("engine", axes)
  rest <- setdiff(axes, c("memory", colour))
  list(colour = colour, facets = varying_axes(dt, rest),
       fixed = fixed_axes_text(dt, rest))
}

# dt with memory, engine and the facet axes as ordered factors, and .colour
# (the engine, or "all").
with_layout_columns <- function(dt, layout) {
  dt <- with_axis_factors(dt, c("memory", layout$colour, layout$facets))
  dt[, .colour := if (length(layout$colour)) get(layout$colour) else factor("all")]
  dt
}

colour_legend <- function(dt) {
  if (nlevels(dt$.colour) <= 1) guides(colour = "none", fill = "none")
}

# Axis breaks at whole numbers (seconds).
whole_breaks <- function(limits) {
  breaks <- pretty(limits)
  breaks[breaks == round(breaks)]
}

# ---------------------------------------------------------------------------
# Against memory

tps_memory_data <- function(summary, axes) {
  layout <- memory_layout(summary, axes)
  dt <- with_layout_columns(summary[!is.na(tps)], layout)
  dt[, .(tps = stats::median(tps), tps_min = min(tps), tps_max = max(tps),
         reps = .N), by = c(layout$facets, "memory", ".colour")]
}

plot_tps_memory <- function(summary, axes, caption) {
  title <- "Throughput vs memory"
  if (!"memory" %in% axes) return(empty_plot(title, not_applicable("memory"), caption))
  if (nrow(summary) == 0) return(empty_plot(title, NO_DATABASE_CELLS, caption))
  layout <- memory_layout(summary, axes)
  dt <- tps_memory_data(summary, axes)
  if (nrow(dt) == 0) return(empty_plot(title, "no tps figures", caption))
  panels <- panel_layout(dt, layout$facets)
  dodge <- position_dodge(width = 0.25)
  p <- ggplot(dt, aes(memory, tps, colour = .colour, group = .colour)) +
    geom_line(position = dodge) +
    geom_point(size = 2, position = dodge) +
    geom_errorbar(aes(ymin = tps_min, ymax = tps_max), width = 0.2,
                  position = dodge) +
    scale_y_continuous(limits = c(0, NA), labels = thousands) +
    scale_colour_dbsweep() +
    panels$facet +
    colour_legend(dt) +
    labs(title = title,
         subtitle = plot_subtitle(paste("sysbench's final tps, median over repetitions;",
                                   "bars show min and max"), layout$fixed),
         x = MEMORY_TITLE, y = "transactions/s", colour = "engine",
         caption = caption) +
    theme_dbsweep()
  with_panel_rows(p, panels$rows)
}

# KB read and written per transaction, medians over repetitions, long.
io_per_txn_data <- function(summary, axes) {
  layout <- memory_layout(summary, axes)
  dt <- with_layout_columns(summary, layout)
  by <- c(layout$facets, "memory", ".colour")
  out <- dt[, .(read = median_or_na(kb_read_per_txn),
                written = median_or_na(kb_written_per_txn)), by = by]
  out <- melt(out, id.vars = by, measure.vars = c("read", "written"),
              variable.name = "direction", value.name = "kb_per_txn")
  out[, direction := factor(paste("KB", direction), levels = c("KB read", "KB written"))]
  out[!is.na(kb_per_txn)]
}

plot_io_per_txn <- function(summary, axes, caption) {
  title <- "IO per transaction vs memory"
  if (!"memory" %in% axes) return(empty_plot(title, not_applicable("memory"), caption))
  if (nrow(summary) == 0) return(empty_plot(title, NO_DATABASE_CELLS, caption))
  layout <- memory_layout(summary, axes)
  dt <- io_per_txn_data(summary, axes)
  if (nrow(dt) == 0) return(empty_plot(title, "no KB per transaction figures", caption))
  p <- ggplot(dt, aes(memory, kb_per_txn, colour = .colour, group = .colour)) +
    geom_line() +
    geom_point(size = 2) +
    scale_y_continuous(limits = c(0, NA), labels = thousands) +
    scale_colour_dbsweep() +
    facet_axes(layout$facets, "direction",
               labeller = labeller(direction = label_value,
                                   .default = axes_labeller(strip_width(2)))) +
    colour_legend(dt) +
    labs(title = title,
         subtitle = plot_subtitle(paste("device KB read and written per transaction",
                                   "(iostat), median over repetitions"), layout$fixed),
         x = MEMORY_TITLE, y = "KB per transaction", colour = "engine",
         caption = caption) +
    theme_dbsweep()
  with_panel_rows(p, n_combinations(dt, layout$facets))
}

CPU_STATES <- c(us = "user (us)", sy = "system (sy)", wa = "IO wait (wa)",
                id = "idle (id)")
CPU_COLOURS <- c("#0072B2", "#56B4E9", "#D55E00", "grey85")

# Mean us / sy / wa / id over the measured window (system second 1..N, N the
# repetition's sample count, else its duration), per cell (mean over
# repetitions), long. Rows of several devices in one second count once.
cpu_data <- function(system, summary, axes) {
  keys <- c(axes, "rep")
  window <- summary[, c(keys, "seconds", "duration_s"), with = FALSE]
  window[, last := fifelse(is.na(seconds), as.numeric(duration_s), as.numeric(seconds))]
  dt <- system[window[, c(keys, "last"), with = FALSE], on = keys, nomatch = NULL]
  dt <- dt[second >= 1L & (is.na(last) | second <= last)]
  states <- names(CPU_STATES)
  per_second <- dt[, lapply(.SD, mean_or_na), by = c(keys, "second"), .SDcols = states]
  per_rep <- per_second[, lapply(.SD, mean_or_na), by = keys, .SDcols = states]
  per_cell <- per_rep[, lapply(.SD, mean_or_na), by = axes, .SDcols = states]
  out <- melt(per_cell, id.vars = axes, measure.vars = states,
              variable.name = "state", value.name = "percent")
  out[, state := factor(CPU_STATES[as.character(state)], levels = CPU_STATES)]
  out[!is.na(percent)]
}

plot_cpu <- function(system, summary, axes, caption) {
  title <- "CPU by memory and engine"
  if (!"memory" %in% axes) return(empty_plot(title, not_applicable("memory"), caption))
  if (nrow(summary) == 0) return(empty_plot(title, NO_DATABASE_CELLS, caption))
  layout <- memory_layout(summary, axes)
  dt <- cpu_data(system, summary, axes)
  if (nrow(dt) == 0) {
    return(empty_plot(title, "no vmstat rows in the measured window", caption))
  }
  dt <- with_axis_factors(dt, c("memory", layout$colour, layout$facets))
  p <- ggplot(dt, aes(memory, percent, fill = state)) +
    geom_col(position = position_stack(reverse = TRUE), width = 0.7) +
    scale_fill_manual(values = stats::setNames(CPU_COLOURS, CPU_STATES)) +
    scale_y_continuous(limits = c(0, 100.5), breaks = seq(0, 100, 25),
                       expand = expansion(mult = c(0, 0.02))) +
    facet_axes(layout$facets, layout$colour,
               labeller = axes_labeller(strip_width(n_combinations(dt, layout$colour)))) +
    labs(title = title,
         subtitle = plot_subtitle("vmstat, mean over the measured window and repetitions",
                             layout$fixed),
         x = MEMORY_TITLE, y = "CPU time (%)", fill = NULL, caption = caption) +
    theme_dbsweep()
  with_panel_rows(p, n_combinations(dt, layout$facets))
}

# ---------------------------------------------------------------------------
# Over time

# The datadir size (MB) each time it was taken, per repetition.
datadir_data <- function(counters, axes) {
  dt <- counters[name == "datadir_bytes" & !is.na(value)]
  dt[, mb := value / 2^20]
  dt[, c(axes, "rep", "second", "mb"), with = FALSE]
}

plot_datadir <- function(counters, summary, axes, caption) {
  title <- "Datadir size over time"
  if (nrow(summary) == 0) return(empty_plot(title, NO_DATABASE_CELLS, caption))
  dt <- datadir_data(counters, axes)
  if (nrow(dt) == 0) {
    return(empty_plot(title, "no datadir_bytes counters in this study", caption))
  }
  colour <- intersect("engine", axes)
  facets <- varying_axes(dt, setdiff(axes, colour))
  dt <- with_axis_factors(dt, c(colour, facets))
  dt[, .colour := if (length(colour)) get(colour) else factor("all")]
  dt[, .line := do.call(paste, c(unname(as.list(.SD)), sep = "/")),
     .SDcols = c(axes, "rep")]
  panels <- panel_layout(dt, facets)
  p <- ggplot(dt, aes(second, mb, colour = .colour, group = .line)) +
    geom_vline(xintercept = 0, linetype = "dashed", colour = "grey50") +
    geom_line() +
    geom_point(size = 0.8) +
    scale_y_continuous(labels = thousands) +
    expand_limits(y = 0) +
    scale_colour_dbsweep() +
    panels$facet +
    colour_legend(dt) +
    labs(title = title,
         subtitle = plot_subtitle(paste("one line per repetition; dashed: start of the",
                                   "measured window"),
                             fixed_axes_text(dt, setdiff(axes, colour))),
         x = "time from the start of the measured window (s)",
         y = "datadir size (MB)", colour = "engine", caption = caption) +
    theme_dbsweep()
  with_panel_rows(p, panels$rows)
}

# Per-second samples of the measured window (second >= 1) with their tps, and
# stall: a second of the repetition's steady-state window whose tps is below
# its stall threshold, both read from the statistics rule's steady_state.csv
# (`windows`: the study's trim and detected warm-up; computed once there).
timeseries_data <- function(samples, windows, axes, settings = STATS_DEFAULTS) {
  keys <- c(axes, "rep")
  dt <- samples[second >= 1L & !is.na(tps)]
  dt[windows, `:=`(.start = i.window_start, .end = i.window_end,
                   .threshold = i.stall_threshold), on = keys]
  dt[, stall := !is.na(.start) & second >= .start & second <= .end & tps < .threshold]
  dt[, c(".start", ".end", ".threshold") := NULL]
  setattr(dt, "stall_share", settings$stall_share)
  dt[]
}

stall_text <- function(n, share = STATS_DEFAULTS$stall_share) {
  if (n == 0) {
    return(sprintf("no stalls (no second below %s%% of its repetition's median)",
                   format(100 * share)))
  }
  sprintf("%d stalled second(s) marked", n)
}

plot_timeseries <- function(samples, windows, summary, axes, caption, settings = STATS_DEFAULTS,
                            spans = data.table()) {
  title <- "Per-second throughput over the measured window"
  if (nrow(summary) == 0) return(empty_plot(title, NO_DATABASE_CELLS, caption))
  dt <- timeseries_data(samples, windows, axes, settings)
  if (nrow(dt) == 0) return(empty_plot(title, "no per-second tps samples", caption))
  facets <- varying_axes(dt, axes)
  dt <- with_axis_factors(dt, facets)
  dt[, rep := factor(rep)]
  stalls <- dt[stall == TRUE]
  reps <- levels(dt$rep)
  rep_colours <- c(REP_COLOURS, rep("grey40", length(reps)))[seq_along(reps)]
  names(rep_colours) <- reps
  panels <- panel_layout(dt, facets)
  p <- ggplot(dt, aes(second, tps)) +
    geom_line(aes(colour = rep, group = rep), linewidth = 0.4) +
    geom_point(data = stalls, aes(fill = "stall"), shape = 21, size = 2.2,
               colour = "white", stroke = 0.3) +
    scale_colour_manual(values = rep_colours) +
    scale_fill_manual(values = c(stall = STALL_COLOUR),
                      labels = sprintf("below %s%% of the repetition's median",
                                       format(100 * settings$stall_share)),
                      drop = FALSE) +
    scale_y_continuous(labels = thousands) +
    scale_x_continuous(breaks = whole_breaks) +
    expand_limits(y = 0) +
    panels$facet +
    labs(title = title,
         subtitle = plot_subtitle(stall_text(nrow(stalls), settings$stall_share),
                             fixed_axes_text(dt, axes)),
         x = "second of the measured window (s)", y = "transactions/s",
         colour = "repetition", fill = NULL, caption = caption) +
    theme_dbsweep()
  if (length(reps) <= 1) p <- p + guides(colour = "none")
  if (!nrow(stalls)) p <- p + guides(fill = "none")
  p <- with_event_spans(p, spans_for(spans, dt, axes))
  with_panel_rows(p, panels$rows)
}

# ---------------------------------------------------------------------------
# Spread of the per-second throughput

spread_data <- function(samples, axes) {
  samples[second >= 1L & !is.na(tps)]
}

plot_spread <- function(samples, summary, axes, caption, kind) {
  title <- paste("Per-second throughput by memory",
                 if ("engine" %in% axes) "and engine")
  if (!"memory" %in% axes) return(empty_plot(title, not_applicable("memory"), caption))
  if (nrow(summary) == 0) return(empty_plot(title, NO_DATABASE_CELLS, caption))
  dt <- spread_data(samples, axes)
  if (nrow(dt) == 0) return(empty_plot(title, "no per-second tps samples", caption))
  layout <- memory_layout(dt, axes)
  dt <- with_layout_columns(dt, layout)
  panels <- panel_layout(dt, layout$facets)
  dodge <- 0.75
  geoms <- if (kind == "jitter") {
    list(
      geom_point(aes(colour = .colour),
                 position = position_jitterdodge(jitter.width = 0.25, jitter.height = 0,
                                                 dodge.width = dodge, seed = 1),
                 size = 0.8, alpha = 0.5),
      stat_summary(aes(group = .colour), fun = stats::median, fun.min = stats::median,
                   fun.max = stats::median, geom = "crossbar",
                   position = position_dodge(width = dodge), width = 0.5,
                   linewidth = 0.3),
      scale_colour_dbsweep()
    )
  } else {
    list(
      geom_boxplot(aes(fill = .colour), position = position_dodge(width = dodge),
                   width = 0.65, outlier.size = 0.7),
      scale_fill_dbsweep()
    )
  }
  note <- if (kind == "jitter") {
    "one point per second; bars: medians"
  } else {
    "boxes: quartiles; whiskers: 1.5 x IQR"
  }
  p <- ggplot(dt, aes(memory, tps)) +
    geoms +
    scale_y_continuous(labels = thousands) +
    expand_limits(y = 0) +
    panels$facet +
    colour_legend(dt) +
    labs(title = title, subtitle = plot_subtitle(note, layout$fixed),
         x = MEMORY_TITLE, y = "transactions/s (per-second samples)",
         colour = "engine", fill = "engine", caption = caption) +
    theme_dbsweep()
  with_panel_rows(p, panels$rows)
}

plot_jitter_memory <- function(samples, summary, axes, caption) {
  plot_spread(samples, summary, axes, caption, "jitter")
}

plot_boxplot_memory <- function(samples, summary, axes, caption) {
  plot_spread(samples, summary, axes, caption, "boxplot")
}

rule_db_plots <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)

  plots <- build_db_plots(input, params)
  for (name in names(plots)) {
    save_plot(plots[[name]], output[[name]])
    log_line("%s -> %s", name, output[[name]])
  }
  invisible(plots)
}

# rule_db_plots' seven plots of the study whose tables are `input`, built but not drawn: drawing is
# most of the rule's time, and the tests read these objects for each shape of study.
build_db_plots <- function(input, params) {
  axes <- axes_param(params)
  all_reps <- read_database_summary(input[["summary"]], axes)
  summary <- database_rows(all_reps)
  samples <- database_part(read_database_samples(input[["samples"]], axes),
                           summary, axes)
  system <- database_part(read_system(input[["system"]], axes), summary, axes)
  counters <- database_part(read_counters(input[["counters"]], axes), summary, axes)
  windows <- read_table(input[["steady_state"]], axes, c("rep", "window_start", "window_end",
                                                          "stall_threshold"))
  caption <- caption_text(read_provenance(input[["provenance"]]))
  log_line(paste("%d database repetitions (%d rows of other tools left out),",
                 "%d per-second samples, %d system rows, %d counter rows, axes: %s"),
           nrow(summary), nrow(all_reps) - nrow(summary), nrow(samples),
           nrow(system), nrow(counters), paste(axes, collapse = ", "))

  list(
    tps_memory = plot_tps_memory(summary, axes, caption),
    io_per_txn = plot_io_per_txn(summary, axes, caption),
    cpu = plot_cpu(system, summary, axes, caption),
    datadir = plot_datadir(counters, summary, axes, caption),
    jitter_memory = plot_jitter_memory(samples, summary, axes, caption),
    boxplot_memory = plot_boxplot_memory(samples, summary, axes, caption),
    timeseries = plot_timeseries(samples, windows, summary, axes, caption,
                                 stats_settings(params[["analysis"]]),
                                 event_spans(read_events(input[["events"]], axes), axes))
  )
}
