# Tables a person reads: one row per cell, and study 1's saturation table.
#
# Snakemake: input summary, samples (+ optional provenance); output cells_csv,
# cells_md, saturation_csv, saturation_md; params axes; log.
#
# Column naming in cells.csv: per-second statistics are <metric>_<stat>
# (iops_mean, lat_ms_p95, ...); the tool's own final figures keep the names
# they have in summary.csv (lat_mean_ms, lat_p95_ms, lat_p99_ms), averaged
# over repetitions.

# check_sample_counts() and MIN_SAMPLE_SHARE live in common.R (db_tables.R
# checks database cells the same way).

# mean, sd, 95th percentile and max of x without its NAs, as doubles.
describe_values <- function(x, prefix) {
  x <- x[!is.na(x)]
  stats <- if (length(x) == 0) {
    rep(NA_real_, 4)
  } else {
    c(mean(x), if (length(x) > 1) stats::sd(x) else NA_real_,
      stats::quantile(x, 0.95, names = FALSE), max(x))
  }
  stats::setNames(as.list(as.numeric(stats)),
                  paste0(prefix, c("_mean", "_sd", "_p95", "_max")))
}

# Which per-second latency the cell's numbers come from.
latency_source <- function(lat_ms, lat_pct_ms) {
  used <- unique(ifelse(!is.na(lat_ms), "lat_ms",
                        ifelse(!is.na(lat_pct_ms), "lat_pct_ms", NA)))
  used <- used[!is.na(used)]
  if (length(used) == 0) NA_character_ else paste(sort(used), collapse = "+")
}

# One row per cell: reps, samples, per-second statistics and the tool's final
# latency figures averaged over repetitions.
cells_table <- function(summary, samples, axes) {
  per_second <- samples[, c(
    list(seconds = .N),
    describe_values(iops, "iops"),
    list(mibs_mean = mean_or_na(mibs)),
    describe_values(fifelse(is.na(lat_ms), lat_pct_ms, lat_ms), "lat_ms"),
    list(lat_source = latency_source(lat_ms, lat_pct_ms))
  ), by = axes]
  finals <- summary[, .(
    reps = uniqueN(rep),
    lat_mean_ms = mean_or_na(lat_mean_ms),
    lat_p95_ms = mean_or_na(lat_p95_ms),
    lat_p99_ms = mean_or_na(lat_p99_ms)
  ), by = axes]
  cells <- per_second[finals, on = axes]
  cells[is.na(seconds), seconds := 0L]
  setcolorder(cells, c(axes, "reps", "seconds"))
  setorderv(cells, axes)
  cells[]
}

# Study 1's table. For each group of all axes but threads: threads, iops,
# lat_mean_ms, lat_p95_ms (per-cell means over repetitions of the tool's final
# figures) and saturation = lat_mean_ms / lat_mean_ms at the group's smallest
# thread count. Without a threads axis every cell counts as 1 thread.
saturation_table <- function(summary, axes) {
  summary <- copy(summary)
  if (!"threads" %in% axes) summary[, threads := 1L]
  group <- setdiff(axes, "threads")
  by_cell <- c(group, "threads")
  sat <- summary[, .(
    iops = mean_or_na(iops),
    lat_mean_ms = mean_or_na(lat_mean_ms),
    lat_p95_ms = mean_or_na(lat_p95_ms)
  ), by = by_cell]
  setorderv(sat, by_cell)
  sat[, saturation := baseline_ratio(lat_mean_ms, lat_mean_ms[which.min(threads)]), by = group]
  sat[]
}

SATURATION_PREAMBLE <- paste(
  "Saturation: average latency divided by the average latency at the",
  "group's smallest thread count. Figures are the tool's own final ones,",
  "averaged over repetitions."
)

rule_tables <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)

  axes <- axes_param(params)
  summary <- read_summary(input[["summary"]], axes)
  samples <- read_samples(input[["samples"]], axes)
  provenance <- read_provenance(input[["provenance"]])
  caption <- if (length(provenance)) caption_text(provenance) else NULL
  if (nrow(summary) == 0) stop(input[["summary"]], ": no repetitions")
  log_line("%d repetitions, %d per-second samples, axes: %s",
           nrow(summary), nrow(samples), paste(axes, collapse = ", "))

  check_sample_counts(summary, samples, axes)

  cells <- cells_table(summary, samples, axes)
  fwrite(cells, output[["cells_csv"]])
  write_md_table(cells, output[["cells_md"]], caption = caption)
  log_line("cells: %d rows -> %s", nrow(cells), output[["cells_csv"]])

  sat <- saturation_table(summary, axes)
  fwrite(sat, output[["saturation_csv"]])
  write_md_table(sat, output[["saturation_md"]],
                 group_by = setdiff(axes, "threads"),
                 preamble = SATURATION_PREAMBLE, caption = caption)
  log_line("saturation: %d rows -> %s", nrow(sat), output[["saturation_csv"]])
  invisible(list(cells = cells, saturation = sat))
}
