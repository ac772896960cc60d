# The insert benchmark (study 8): per phase (load, index, qr, qp) inserted rows
# and queries per second against the target rate, CPU us and KB read and
# written per operation (host-wide, from vmstat and iostat each second, with
# the context switches per operation, and the server's own, from its process
# tree's totals at the phase's start and end: server_*), KB written per inserted
# row (*_per_insert: in qr and qp an operation is a query, but the writes come
# from the inserts), and the database size; every figure also relative to the
# baseline configuration (= 1.0), as bars, with the ratio's 95% CI and verdict
# by the study's one method (statistics.R values_to_baseline: the run-to-run
# noise pooled over the cells; with one repetition everywhere there is none).
#
# Snakemake: input phases (+ provenance); output table_csv, table_md, plot;
# params axes, baseline (axis -> value, may be empty), analysis; log.
#
# A configuration is a cell's values of the axes that vary. Figures are
# medians over repetitions, compared along the axes params$baseline names
# (all varying axes when it names none): relative to the configuration with
# those at their baseline values and the other axes the same.

INSERT_METRICS <- c("inserts_s", "queries_s", "cpu_us_per_op", "kb_read_per_op",
                    "kb_written_per_op", "kb_written_per_insert", "cs_per_op",
                    "server_cpu_us_per_op", "server_kb_read_per_op",
                    "server_kb_written_per_op", "server_kb_written_per_insert", "db_mb")
# NA in phases tables from before they were recorded: the server's own figures, context switches, KB
# written per inserted row.
LATER_INSERT_METRICS <- c("kb_written_per_insert", "cs_per_op", "server_cpu_us_per_op",
                          "server_kb_read_per_op", "server_kb_written_per_op",
                          "server_kb_written_per_insert")
PHASE_ORDER <- c("load", "index", "qr", "qp")
# A phase whose inserts fall short of this share of the target is marked.
RATE_TOLERANCE <- 0.95

read_phases <- function(path, axes) {
  dt <- read_table(path, axes, required = c("rep", "phase", "target_inserts_s",
                                            setdiff(INSERT_METRICS, LATER_INSERT_METRICS)))
  dt[, phase := as.character(phase)]
  dt
}

insert_table <- function(phases, axes, baseline = list(), settings = STATS_DEFAULTS) {
  if (nrow(phases) == 0) stop("phases: no rows (no insert benchmark cells ran)")
  phases <- copy(phases)
  for (col in setdiff(LATER_INSERT_METRICS, names(phases))) set(phases, j = col, value = NA_real_)
  vary <- varying_axes(phases, axes)
  by <- c(vary, "phase")
  cells <- phases[, c(lapply(.SD, median_or_na), list(reps = .N)), by = by,
                  .SDcols = c("target_inserts_s", INSERT_METRICS)]
  long <- melt(cells, id.vars = c(by, "reps", "target_inserts_s"),
               measure.vars = INSERT_METRICS, variable.name = "metric", variable.factor = FALSE)
  long <- relative_to_baseline(long, vary, baseline, c("phase", "metric"))
  values <- melt(phases, id.vars = c(vary, "rep", "phase"), measure.vars = INSERT_METRICS,
                 variable.name = "metric", variable.factor = FALSE)
  long <- with_ratio_ci(long, values, vary, baseline, c("phase", "metric"), settings, unit = "repetitions")
  long[, short_of_target := metric == "inserts_s" & !is.na(target_inserts_s) &
         value < RATE_TOLERANCE * target_inserts_s]
  long[, phase := factor(phase, levels = intersect(PHASE_ORDER, unique(phase)))]
  long[, metric := factor(metric, levels = INSERT_METRICS)]
  setorderv(long, c("phase", "metric", vary))
  long[, phase := as.character(phase)]
  long[, metric := as.character(metric)]
  long[]
}

insert_plot <- function(table, caption = NULL) {
  dt <- copy(table)[!is.na(relative)]
  if (nrow(dt) == 0) {
    return(empty_plot("Insert benchmark", "nothing to compare", caption))
  }
  dt[, phase := factor(phase, levels = intersect(PHASE_ORDER, unique(phase)))]
  dt[, metric := factor(metric, levels = INSERT_METRICS)]
  ggplot(dt, aes(x = configuration, y = relative, fill = configuration)) +
    geom_col() +
    geom_hline(yintercept = 1, linetype = "dashed", colour = "grey30") +
    facet_grid(metric ~ phase, scales = "free_y",  # a metric's name in lines that fit its row's height
               labeller = labeller(metric = function(m) wrap_text(gsub("_", " ", m), 14))) +
    scale_fill_dbsweep() +
    labs(title = "Insert benchmark: each phase relative to the baseline (= 1.0)",
         subtitle = plot_subtitle(sprintf("baseline: %s",
                                          paste(unique(table[baseline == TRUE]$configuration),
                                                collapse = "; ")), width = 9),
         x = NULL, y = "relative to baseline", fill = NULL, caption = caption) +
    legend_in_columns(unique(dt$configuration), "fill", width = 9) +
    theme_dbsweep() +
    theme(axis.text.x = element_blank(), axis.ticks.x = element_blank())
}

rule_insert_benchmark <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)
  axes <- axes_param(params)
  phases <- read_phases(input[["phases"]], axes)
  provenance <- read_provenance(input[["provenance"]])
  caption <- if (length(provenance)) caption_text(provenance) else NULL
  table <- insert_table(phases, axes, params[["baseline"]], stats_settings(params[["analysis"]]))
  log_line("insert benchmark: %d phase rows -> %d table rows", nrow(phases), nrow(table))
  write_csv(table, output[["table_csv"]])
  shown <- table[, .(phase, metric, configuration, value, relative, ratio_low, ratio_high, verdict,
                     short_of_target = ifelse(short_of_target, "SHORT", ""))]
  write_md_table(shown, output[["table_md"]], group_by = "phase")
  save_plot(insert_plot(table, caption), output[["plot"]], width = 9,
            height = 2 + 1.1 * length(INSERT_METRICS))  # a row of panels per metric
  invisible(table)
}
