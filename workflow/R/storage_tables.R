# Tables a person reads: one row per cell, and study 1's saturation table.
#
# Snakemake: input summary, samples (+ optional provenance); output cells_csv,
# cells_md, saturation_csv, saturation_md; params axes; log.
#
# Column naming in cells.csv: statistics of the per-second values are
# persec_<metric>_<stat> (persec_iops_mean, persec_lat_p95_ms: the 95th
# percentile of the per-second latencies, ...); the tool's own figures over the
# whole run keep the names they have in summary.csv (lat_mean_ms, lat_p95_ms,
# lat_p99_ms: means over repetitions; lat_max_ms: the largest of any
# repetition), so "p95 of per-second means" and "the tool's p95" never share a
# name.

# check_sample_counts() and MIN_SAMPLE_SHARE live in read.R (database_tables.R
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
    describe_values(iops, "persec_iops"),
    list(persec_mibs_mean = mean_or_na(mibs)),
    describe_values(fifelse(is.na(lat_ms), lat_pct_ms, lat_ms), "persec_lat"),
    list(lat_source = latency_source(lat_ms, lat_pct_ms))
  ), by = axes]
  setnames(per_second, paste0("persec_lat_", c("mean", "sd", "p95", "max")),
           paste0("persec_lat_", c("mean", "sd", "p95", "max"), "_ms"))
  if (!"lat_max_ms" %in% names(summary)) summary[, lat_max_ms := NA_real_]
  finals <- summary[, .(
    reps = uniqueN(rep),
    lat_mean_ms = mean_or_na(lat_mean_ms),
    lat_p95_ms = mean_or_na(lat_p95_ms),
    lat_p99_ms = mean_or_na(lat_p99_ms),
    lat_max_ms = if (all(is.na(lat_max_ms))) NA_real_ else max(lat_max_ms, na.rm = TRUE)
  ), by = axes]
  cells <- per_second[finals, on = axes]
  cells[is.na(seconds), seconds := 0L]
  setcolorder(cells, c(axes, "reps", "seconds"))
  setorderv(cells, axes)
  cells[]
}

# Study 1's table. For each group of all axes but threads: threads, iops, mibs,
# lat_mean_ms, lat_p95_ms, lat_p99_ms (per-cell means over repetitions of the
# tool's final figures), the device as iostat saw it (device_means: r_s, aqu_sz,
# util_pct; with the system table) and saturation = lat_mean_ms / lat_mean_ms at
# the group's smallest thread count. Without a threads axis every cell counts as
# 1 thread.
saturation_table <- function(summary, axes, system = NULL, samples = NULL) {
  summary <- copy(summary)
  if (!"threads" %in% axes) summary[, threads := 1L]
  if (!"class_util_pct" %in% names(summary)) summary[, class_util_pct := NA_real_]  # older tables
  group <- setdiff(axes, "threads")
  by_cell <- c(group, "threads")
  sat <- summary[, .(
    iops = mean_or_na(iops),
    mibs = mean_or_na(mibs),
    lat_mean_ms = mean_or_na(lat_mean_ms),
    lat_p95_ms = mean_or_na(lat_p95_ms),
    lat_p99_ms = mean_or_na(lat_p99_ms),
    class_util_pct = mean_or_na(class_util_pct)
  ), by = by_cell]
  if (!is.null(system)) {
    sat <- device_means(system, samples, axes)[sat, on = axes]
    setcolorder(sat, c(by_cell, "iops", "mibs", "lat_mean_ms", "lat_p95_ms", "lat_p99_ms"))
  }
  if (all(is.na(sat$class_util_pct))) sat[, class_util_pct := NULL]  # no cell on a device class
  setorderv(sat, by_cell)
  sat[, saturation := baseline_ratio(lat_mean_ms, lat_mean_ms[which.min(threads)]), by = group]
  sat[]
}

# iostat's reads/s (r_s), writes/s (w_s), average queue size (aqu_sz) and %util (util_pct) per
# cell: means over each repetition's measured seconds (1 to its last sample's
# second; the system table numbers its rows like the samples, before the window
# 0 and below), then over repetitions. NA for a cell without a block device
# (tmpfs: no iostat).
device_means <- function(system, samples, axes) {
  last <- samples[, .(last_second = max(second)), by = c(axes, "rep")]
  io <- system[!is.na(device) & device != ""][last, on = c(axes, "rep"), nomatch = NULL]
  io <- io[second >= 1L & second <= last_second,
           .(r_s = mean(r_s), w_s = mean(w_s), aqu_sz = mean(aqu_sz), util = mean(util)),
           by = c(axes, "rep")]
  io[, .(r_s = mean(r_s), w_s = mean(w_s), aqu_sz = mean(aqu_sz), util_pct = mean(util)), by = axes]
}

SATURATION_PREAMBLE <- paste(
  "Saturation: average latency divided by the average latency at the",
  "group's smallest thread count. Figures are the tool's own final ones,",
  "averaged over repetitions; r_s, w_s, aqu_sz and util_pct are iostat's reads/s,",
  "writes/s, average queue size and %util over the measured seconds (none on tmpfs);",
  "class_util_pct is the device class's utilisation (%, the largest share of a cap",
  "the device's rates reached, per second, mean over the measured seconds; NA without a class)."
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

  system <- if (is.null(input[["system"]])) NULL else read_system(input[["system"]], axes)
  sat <- saturation_table(summary, axes, system, samples)
  fwrite(sat, output[["saturation_csv"]])
  write_md_table(sat, output[["saturation_md"]],
                 group_by = setdiff(axes, "threads"),
                 preamble = SATURATION_PREAMBLE, caption = caption)
  log_line("saturation: %d rows -> %s", nrow(sat), output[["saturation_csv"]])
  invisible(list(cells = cells, saturation = sat))
}
