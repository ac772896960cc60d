# The user's own query (study 10): per configuration, the median time per
# execution and the median deltas of the server's counters per execution
# (medians over repetitions of each repetition's median), each also relative
# to the baseline configuration (= 1.0), as bars, with the ratio's 95% CI and
# verdict by the study's one method (statistics.R values_to_baseline: with one
# repetition, a bootstrap of the executions).
#
# Snakemake: input executions (+ provenance); output table_csv, table_md,
# plot; params axes, baseline (axis -> value, may be empty), analysis; log.
#
# executions.csv.gz is long: one row per (cell, rep, execution, name), name
# being ms, rows or a counter. A configuration is a cell's values of the axes
# that vary; figures are compared along the axes params$baseline names (all
# varying axes when it names none), within equal values of the others.

read_executions <- function(path, axes) {
  read_table(path, axes, required = c("rep", "execution", "name", "value"))
}

query_table <- function(executions, axes, baseline = list(), settings = STATS_DEFAULTS) {
  if (nrow(executions) == 0) stop("executions: no rows (no query cells ran)")
  vary <- varying_axes(executions, axes)
  per_rep <- executions[, .(value = median_or_na(value), executions = .N), by = c(vary, "rep", "name")]
  cells <- per_rep[, .(value = median_or_na(value), executions = sum(executions)), by = c(vary, "name")]
  cells <- relative_to_baseline(cells, vary, baseline, "name")
  cells <- with_ratio_ci(cells, executions, vary, baseline, "name", settings, unit = "executions")
  first <- c("ms", "rows")
  cells[, name_order := ifelse(name %in% first, match(name, first), 3L)]
  setorderv(cells, c("name_order", "name", vary))
  cells[, name_order := NULL]
  cells[]
}

query_plot <- function(table, caption = NULL) {
  dt <- copy(table)[!is.na(value) & name != "rows"]
  dt <- dt[, if (any(value != 0)) .SD, by = name]  # counters that never moved say nothing
  if (nrow(dt) == 0) return(empty_plot("Query timing", "nothing measured", caption))
  dt[, name := factor(name, levels = unique(name))]
  ggplot(dt, aes(x = configuration, y = value, fill = configuration)) +
    geom_col() +
    facet_wrap(~name, scales = "free_y") +
    scale_fill_dbsweep() +
    labs(title = "Query: median per execution (ms, then counter deltas)",
         subtitle = plot_subtitle("counters that never moved are left out; the table has them all",
                                  width = 11),
         x = NULL, y = "per execution", fill = NULL, caption = caption) +
    legend_in_columns(unique(dt$configuration), "fill", width = 11) +
    theme_dbsweep() +
    theme(axis.text.x = element_blank(), axis.ticks.x = element_blank(),
          strip.text = element_text(size = rel(0.7)))
}

rule_query_timing <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)
  axes <- axes_param(params)
  executions <- read_executions(input[["executions"]], axes)
  provenance <- read_provenance(input[["provenance"]])
  caption <- if (length(provenance)) caption_text(provenance) else NULL
  table <- query_table(executions, axes, params[["baseline"]], stats_settings(params[["analysis"]]))
  log_line("query timing: %d execution rows -> %d table rows", nrow(executions), nrow(table))
  write_csv(table, output[["table_csv"]])
  write_md_table(table[, .(name, configuration, value, relative, ratio_low, ratio_high, verdict)],
                 output[["table_md"]], group_by = "name")
  save_plot(query_plot(table, caption), output[["plot"]], width = 11, height = 10)
  invisible(table)
}
