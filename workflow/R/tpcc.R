# The tpcc table: one row per tpcc cell, with tpmC (committed New-Orders per
# minute), tps, the share of each transaction type, New-Order rollbacks, retries
# (deadlocks, lock wait timeouts, serialization failures) and the consistency
# check's verdict.
#
# Snakemake: input summary (+ optional provenance); output tpcc_csv, tpcc_md;
# params axes; log.
#
# Figures are medians over repetitions; counts are sums. check is "ok" when
# every repetition's check passed, "FAILED (k of n reps)" when any failed, and
# "not run" when none ran; a failed check is also listed, warehouse by warehouse,
# in each repetition's summary.json (check_failed).

TPCC_TYPES <- c("new_order", "payment", "order_status", "delivery", "stock_level")

check_verdict <- function(check) {
  ran <- check[!is.na(check)]
  failed <- sum(ran == "failed")
  if (!length(ran)) return("not run")
  if (failed) return(sprintf("FAILED (%d of %d reps)", failed, length(check)))
  "ok"
}

tpcc_table <- function(summary, axes) {
  summary <- summary[tool == "tpcc"]
  if (!nrow(summary)) stop("no tpcc repetitions in the summary")
  by <- intersect(axes, names(summary))
  out <- summary[, {
    committed <- vapply(TPCC_TYPES, function(t) sum(get(t), na.rm = TRUE), 0)
    total <- sum(committed) + sum(rollbacks, na.rm = TRUE)
    c(list(reps = .N, tpmc = median_or_na(tpmc), tps = median_or_na(tps)),
      as.list(setNames(round(100 * committed / total, 1),
                       paste0(TPCC_TYPES, "_pct"))),
      list(rollback_pct = round(100 * sum(rollbacks, na.rm = TRUE) / total, 2),
           retries = sum(retries, na.rm = TRUE),
           check = check_verdict(check),
           check_failures = sum(check_failures, na.rm = TRUE)))
  }, by = by]
  order_by_axes(out, by)
}

rule_tpcc_table <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con))
  axes <- axes_param(params)
  summary <- read_summary(input[["summary"]], axes)
  provenance <- read_provenance(input[["provenance"]])
  caption <- if (length(provenance)) caption_text(provenance) else NULL
  table <- tpcc_table(summary, axes)
  failed <- table[check != "ok" & check != "not run"]
  if (nrow(failed)) {
    log_line("tpcc consistency check FAILED in %d cell(s)", nrow(failed))
  }
  write_csv(table, output[["tpcc_csv"]])
  preamble <- if (nrow(failed)) {
    sprintf("**The TPC-C consistency check FAILED in %d cell(s)**: see check_failed in their summary.json.",
            nrow(failed))
  }
  write_md_table(table, output[["tpcc_md"]], preamble = preamble, caption = caption)
  log_line("tpcc: %d rows -> %s", nrow(table), output[["tpcc_csv"]])
  invisible(table)
}
