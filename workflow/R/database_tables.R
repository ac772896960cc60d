# Tables of database studies (tool sysbench): engine x memory (study 4), the
# binary log tables (study 5) and one efficiency row per cell (study 7).
#
# Snakemake: input summary, samples (+ optional provenance; system and
# counters may be given and are not read); output engine_memory_csv,
# engine_memory_md, binlog_csv, binlog_md, efficiency_csv, efficiency_md;
# params axes, baseline (axis -> value, may be empty); log.
#
# Rows of other tools (fio, sysbench-fileio storage cells in the same study)
# are left out. Every figure is the median over repetitions of the tool's own
# final figure. A table the study cannot give (no engine, memory or binlog
# axis) is still written: columns status ("not applicable") and note
# ("not applicable: this study has no memory axis").
#
# binlog.csv holds table (b) of binlog.md: binlog, memory, one column per
# filesystem (table (a) when the study has no filesystem axis); axes that vary
# besides come first, as in the md's ### sections.

# The final figures of efficiency.csv, in this order.
EFFICIENCY_COLUMNS <- c("tps", "lat_p95_ms", "hit_ratio", "kb_read_per_txn",
                        "kb_written_per_txn", "cpu_us_per_txn",
                        "datadir_mb_start", "datadir_mb_end", "memory_limit_mb")

# Stops on a repetition that counted transactions but reports no throughput.
check_database_reps <- function(summary, axes) {
  bad <- summary[!is.na(transactions) & transactions > 0 & (is.na(tps) | tps <= 0)]
  if (nrow(bad)) {
    b <- bad[1]
    stop(sprintf(paste0(
      "cell %s rep %d: tps is %s but transactions = %s; the summary is ",
      "inconsistent. %d repetition(s) like this."),
      cell_name(b, axes), b$rep, format(b$tps), format(b$transactions),
      nrow(bad)))
  }
  invisible(summary)
}

# Median tps and repetitions per combination of the given axes.
tps_medians <- function(summary, by) {
  summary[, .(tps = median_or_na(tps), reps = .N), by = by]
}

# Adds "<value>/<base>" columns: each value's column divided by the base's
# (NA where the base is missing or not positive). Returns the new names.
add_ratios <- function(wide, values, base) {
  others <- setdiff(intersect(values, names(wide)), base)
  if (!base %in% names(wide)) return(character())
  ratios <- paste0(others, "/", base)
  for (i in seq_along(others)) {
    b <- wide[[base]]
    set(wide, j = ratios[i],
        value = ifelse(!is.na(b) & b > 0, wide[[others[i]]] / b, NA_real_))
  }
  ratios
}

ratio_sentence <- function(ratios, axis, base) {
  if (!length(ratios)) return(NULL)
  sprintf("%s: ratio to %s = %s.", paste(ratios, collapse = ", "), axis, base)
}

# Study 4: rows memory (by size), one column per engine with the median tps,
# then "<engine>/<baseline engine>" ratios. Axes that vary besides engine and
# memory make sections (attr group_by).
engine_memory_table <- function(summary, axes, baseline = list()) {
  missing <- setdiff(c("engine", "memory"), axes)
  if (length(missing)) return(not_applicable_table(not_applicable(missing)))
  if (nrow(summary) == 0) return(not_applicable_table(NO_DATABASE_CELLS))
  group <- varying_axes(summary, setdiff(axes, c("engine", "memory")))
  base <- baseline_value(summary$engine, "engine", baseline)
  cells <- tps_medians(summary, c(group, "memory", "engine"))
  wide <- pivot_axis(cells, c(group, "memory"), "engine", "tps")
  ratios <- add_ratios(wide, axis_levels(summary$engine, "engine"), base)
  setattr(wide, "group_by", group)
  setattr(wide, "preamble", paste(c(
    paste("Median over repetitions of sysbench's final tps (transactions/s),",
          "by memory (rows) and engine (columns)."),
    ratio_sentence(ratios, "engine", base),
    if (length(fixed_axes_text(summary, axes))) {
      sprintf("Same in every cell: %s.", fixed_axes_text(summary, axes))
    }), collapse = " "))
  wide
}

# Study 5. by_memory: rows memory (when the study has a memory axis), one
# column per binlog value with the median tps, then "<binlog>/<baseline>"
# ratios; sections by the other varying axes. by_filesystem: "binlog | memory
# | ext4 | xfs", sections by the axes that vary besides these three.
binlog_tables <- function(summary, axes, baseline = list()) {
  if (!"binlog" %in% axes) {
    na <- not_applicable_table(not_applicable("binlog"))
    return(list(by_memory = na, by_filesystem = na))
  }
  if (nrow(summary) == 0) {
    na <- not_applicable_table(NO_DATABASE_CELLS)
    return(list(by_memory = na, by_filesystem = na))
  }
  memory <- intersect("memory", axes)
  group <- varying_axes(summary, setdiff(axes, c("binlog", memory)))
  by_memory <- pivot_axis(tps_medians(summary, c(group, memory, "binlog")),
                          c(group, memory), "binlog", "tps")
  base <- baseline_value(summary$binlog, "binlog", baseline)
  ratios <- add_ratios(by_memory, axis_levels(summary$binlog, "binlog"), base)
  setattr(by_memory, "group_by", group)
  setattr(by_memory, "preamble", ratio_sentence(ratios, "binlog", base))

  by_filesystem <- if ("filesystem" %in% axes) {
    group <- varying_axes(summary, setdiff(axes, c("binlog", memory, "filesystem")))
    rows <- c(group, "binlog", memory)
    wide <- pivot_axis(tps_medians(summary, c(rows, "filesystem")), rows,
                       "filesystem", "tps")
    setattr(wide, "group_by", group)
  } else {
    not_applicable_table(not_applicable("filesystem"))
  }
  list(by_memory = by_memory, by_filesystem = by_filesystem)
}

# One row per database cell: repetitions and the medians of the final figures.
efficiency_table <- function(summary, axes) {
  if (nrow(summary) == 0) return(not_applicable_table(NO_DATABASE_CELLS))
  out <- summary[, c(list(reps = .N), lapply(.SD, median_or_na)), by = axes,
                 .SDcols = EFFICIENCY_COLUMNS]
  order_by_axes(out, axes)
  out[]
}

EFFICIENCY_PREAMBLE <- paste(
  "One row per database cell; medians over repetitions of the final figures.",
  "tps: transactions/s; lat_p95_ms: 95th percentile latency (ms); hit_ratio:",
  "share of page reads served from memory (0..1); kb_read_per_txn,",
  "kb_written_per_txn: device KB per transaction (iostat); cpu_us_per_txn:",
  "CPU microseconds per transaction (vmstat us + sy); datadir_mb_start,",
  "datadir_mb_end: data directory size (MB) at the start and end;",
  "memory_limit_mb: the server's memory cap (MB), NA when none."
)

# The md lines of one table: its note, or its preamble and (sectioned) table.
table_md_lines <- function(dt, preamble = attr(dt, "preamble")) {
  note <- attr(dt, "not_applicable")
  if (!is.null(note)) return(c(note, ""))
  c(if (length(preamble)) c(preamble, ""),
    md_table_lines(dt, group_by = attr(dt, "group_by")))
}

binlog_md_lines <- function(tables) {
  c("Median over repetitions of sysbench's final tps (transactions/s).", "",
    "## tps by memory and binlog", "", table_md_lines(tables$by_memory),
    "## tps by binlog, memory and filesystem", "",
    table_md_lines(tables$by_filesystem))
}

rule_db_tables <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)

  axes <- axes_param(params)
  baseline <- params[["baseline"]]
  all_reps <- read_database_summary(input[["summary"]], axes)
  summary <- database_rows(all_reps)
  samples <- drop_other_tools(read_database_samples(input[["samples"]], axes),
                              all_reps, axes)
  provenance <- read_provenance(input[["provenance"]])
  caption <- if (length(provenance)) caption_text(provenance) else NULL
  log_line(paste("%d database repetitions (%d rows of other tools left out),",
                 "%d per-second samples, axes: %s"),
           nrow(summary), nrow(all_reps) - nrow(summary), nrow(samples),
           paste(axes, collapse = ", "))

  check_database_reps(summary, axes)
  check_sample_counts(summary, samples, axes)

  engine_memory <- engine_memory_table(summary, axes, baseline)
  binlog <- binlog_tables(summary, axes, baseline)
  efficiency <- efficiency_table(summary, axes)

  write_csv(engine_memory, output[["engine_memory_csv"]])
  write_md_lines(table_md_lines(engine_memory), output[["engine_memory_md"]],
                 caption)
  log_line("engine_memory: %d rows -> %s", nrow(engine_memory),
           output[["engine_memory_csv"]])

  binlog_csv <- if ("filesystem" %in% axes) binlog$by_filesystem else binlog$by_memory
  write_csv(binlog_csv, output[["binlog_csv"]])
  write_md_lines(binlog_md_lines(binlog), output[["binlog_md"]], caption)
  log_line("binlog: %d rows -> %s", nrow(binlog_csv), output[["binlog_csv"]])

  write_csv(efficiency, output[["efficiency_csv"]])
  write_md_lines(table_md_lines(efficiency, EFFICIENCY_PREAMBLE),
                 output[["efficiency_md"]], caption)
  log_line("efficiency: %d rows -> %s", nrow(efficiency),
           output[["efficiency_csv"]])
  invisible(list(engine_memory = engine_memory, binlog = binlog,
                 efficiency = efficiency))
}
