# The user's own query (study 10): per configuration, the median time per
# execution and the median deltas of the server's counters per execution
# (medians over repetitions of each repetition's median), each also relative
# to the baseline configuration (= 1.0), as bars, with the ratio's 95% CI and
# verdict by the study's one method (statistics.R values_to_baseline: with one
# repetition, a bootstrap of the executions).
#
# Each configuration's plan: the fingerprints of the plans its repetitions ran
# (plans.csv.gz: one per repetition, dbsweep.plans: the plan's shape without
# costs, estimates and what the run measured), and against its baseline's:
# "same plan", "other plan", "plans vary" (a repetition of either ran another
# plan than the others), "baseline"; NA where a plan is missing (results
# collected before plans were kept). A verdict between configurations that ran
# the same plan says so: whatever differs, the optimizer's choice did not.
#
# Snakemake: input executions, plans (+ provenance); output table_csv,
# table_md, plot; params axes, baseline (axis -> value, may be empty),
# analysis; log.
#
# executions.csv.gz is long: one row per (cell, rep, execution, name), name
# being ms, rows or a counter. A configuration is a cell's values of the axes
# that vary; figures are compared along the axes params$baseline names (all
# varying axes when it names none), within equal values of the others.

SAME_PLAN <- "same plan"
SAME_PLAN_VERDICT <- " (same plan: not an optimizer effect)"
PLAN_TEXT_COLUMNS <- c("query", "statement", "fingerprint", "file", "host")

read_executions <- function(path, axes) {
  read_table(path, axes, required = c("rep", "execution", "name", "value"))
}

# plans.csv.gz, its fingerprints and files as text (read_table would make a
# fingerprint of digits a number); NULL without the file.
read_plans <- function(path, axes) {
  if (is.null(path) || !length(path) || !file.exists(path)) return(NULL)
  csv <- gunzip_to_temp(path)
  on.exit(unlink(csv), add = TRUE)
  header <- names(fread(csv, nrows = 0L, colClasses = "character"))
  missing <- setdiff(c(axes, "rep", "fingerprint", "file"), header)
  if (length(missing)) stop(path, ": missing column(s) ", paste(missing, collapse = ", "))
  text <- intersect(header, c(setdiff(axes, "threads"), PLAN_TEXT_COLUMNS))
  dt <- fread(csv, colClasses = list(character = text), na.strings = c("", "NA"))
  if ("threads" %in% names(dt)) set(dt, j = "threads", value = as.integer(dt$threads))
  dt[]
}

# Per configuration (the axes `vary`): its plans' fingerprints (" / " between
# several), how many differ, and their files.
plan_summary <- function(plans, vary) {
  plans[!is.na(fingerprint), .(plan_fingerprint = paste(sort(unique(fingerprint)), collapse = " / "),
                               plan_count = uniqueN(fingerprint),
                               plan_files = paste(unique(file), collapse = " ")), by = vary]
}

# cells (query_table's, before ordering) with columns plan_fingerprint, plan_vs_baseline
# and plan_files, and the verdicts of same-plan configurations saying so.
with_plans <- function(cells, plans, vary, baseline) {
  if (is.null(plans) || !nrow(plans[!is.na(fingerprint)])) {
    cells[, `:=`(plan_fingerprint = NA_character_, plan_vs_baseline = NA_character_, plan_files = NA_character_)]
    return(cells[])
  }
  per <- plan_summary(plans, vary)
  cells <- if (length(vary)) merge(cells, per, by = vary, all.x = TRUE, sort = FALSE) else cbind(cells, per)
  groups <- setdiff(vary, baseline_axes(vary, baseline))
  ref <- cells[baseline == TRUE, c(groups, "name", "plan_fingerprint", "plan_count"), with = FALSE]
  setnames(ref, c("plan_fingerprint", "plan_count"), c(".base_plan", ".base_count"))
  cells <- merge(cells, ref, by = c(groups, "name"), all.x = TRUE, sort = FALSE)
  cells[, plan_vs_baseline := fcase(baseline, "baseline",
                                    is.na(plan_fingerprint) | is.na(.base_plan), NA_character_,
                                    plan_count > 1L | .base_count > 1L, "plans vary",
                                    plan_fingerprint == .base_plan, SAME_PLAN,
                                    default = "other plan")]
  cells[plan_vs_baseline %in% SAME_PLAN & !is.na(verdict), verdict := paste0(verdict, SAME_PLAN_VERDICT)]
  cells[, c("plan_count", ".base_plan", ".base_count") := NULL]
  cells[]
}

query_table <- function(executions, axes, baseline = list(), settings = STATS_DEFAULTS, plans = NULL) {
  if (nrow(executions) == 0) stop("executions: no rows (no query cells ran)")
  vary <- varying_axes(executions, axes)
  per_rep <- executions[, .(value = median_or_na(value), executions = .N), by = c(vary, "rep", "name")]
  cells <- per_rep[, .(value = median_or_na(value), executions = sum(executions)), by = c(vary, "name")]
  cells <- relative_to_baseline(cells, vary, baseline, "name")
  cells <- with_ratio_ci(cells, executions, vary, baseline, "name", settings, unit = "executions")
  cells <- with_plans(cells, plans, vary, baseline)
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
  table <- query_table(executions, axes, params[["baseline"]], stats_settings(params[["analysis"]]),
                       plans = read_plans(input[["plans"]], axes))
  log_line("query timing: %d execution rows -> %d table rows", nrow(executions), nrow(table))
  write_csv(table, output[["table_csv"]])
  write_md_table(table[, .(name, configuration, plan_fingerprint, plan_vs_baseline, value, relative, ratio_low,
                           ratio_high, verdict)],
                 output[["table_md"]], group_by = "name")
  save_plot(query_plot(table, caption), output[["plot"]], width = 11, height = 10)
  invisible(table)
}
