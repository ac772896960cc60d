# Tables of database studies (tool sysbench): engine x memory (study 4), the
# binary log tables (study 5) and one efficiency row per cell (study 7).
#
# Snakemake: input summary, cell_stats_csv, comparisons_csv (the
# statistics rule's) (+ optional provenance); output engine_memory_csv,
# engine_memory_md, binlog_csv, binlog_md, efficiency_csv, efficiency_md;
# params axes; log.
#
# Rows of other tools (fio, sysbench-fileio storage cells in the same study)
# are left out. engine_memory and binlog compare cells by the statistics
# rule's medians, ratios and verdicts (one method for every table); efficiency
# holds medians over repetitions of the tool's final figures. A table the study cannot give (no engine, memory or binlog
# axis) is still written: columns status ("not applicable") and note
# ("not applicable: this study has no memory axis").
#
# binlog.csv holds table (b) of binlog.md: binlog, memory, one column per
# filesystem (table (a) when the study has no filesystem axis); axes that vary
# besides come first, as in the md's ### sections.

# The final figures of efficiency.csv, in this order.
EFFICIENCY_COLUMNS <- c("tps", "lat_p95_ms", "hit_ratio", "kb_read_per_txn",
                        "kb_written_per_txn", "log_kb_per_txn", "binlog_kb_per_txn",
                        "cpu_us_per_txn", "cs_per_txn", "server_cpu_us_per_txn",
                        "server_kb_read_per_txn", "server_kb_written_per_txn",
                        "datadir_mb_start", "datadir_mb_end", "memory_limit_mb",
                        "class_util_pct")

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

COMPARED_TPS <- paste(
  "Median per-second tps (transactions/s) of the steady-state windows, median",
  "over repetitions (cell_stats.csv); <value>/<baseline>: the ratio of the",
  "statistics rule (comparisons.csv) and its verdict (\"within noise\" when its",
  "95% CI contains 1; comparisons.md states the test).")

# A database table comparing the values of `axis` (columns) by `rows`, from
# the statistics rule's cells and comparisons (metric tps); NULL-free: a
# not-applicable table when the study lacks an axis or database cells.
tps_comparison <- function(stats, axes, axis, rows, needs = c(axis, rows)) {
  missing <- setdiff(needs, axes)
  if (length(missing)) return(not_applicable_table(not_applicable(missing)))
  cells <- stats$cells[metric == "tps"]
  if (nrow(cells) == 0) return(not_applicable_table(NO_DATABASE_CELLS))
  wide <- comparison_wide(cells, stats$comparisons, axes, axis, "tps",
                          rows = intersect(rows, axes), text = FALSE)
  fixed <- fixed_axes_text(cells, axes)
  setattr(wide, "preamble", paste(c(COMPARED_TPS,
    if (length(attr(wide, "ratios"))) sprintf("Baseline %s: %s.", axis, attr(wide, "baseline")),
    if (length(fixed)) sprintf("Same in every cell: %s.", fixed)), collapse = " "))
  wide
}

# Study 4: rows memory (by size), one column per engine, then
# "<engine>/<baseline engine>" ratios and verdicts. Axes that vary besides
# engine and memory make sections (attr group_by).
engine_memory_table <- function(stats, axes) {
  tps_comparison(stats, axes, "engine", "memory")
}

# Study 5. by_memory: rows memory (when the study has a memory axis), one
# column per binlog value, then "<binlog>/<baseline>" ratios and verdicts;
# sections by the other varying axes. by_filesystem: "binlog | memory | ext4 |
# xfs" medians, sections by the axes that vary besides these three.
binlog_tables <- function(stats, axes) {
  by_memory <- tps_comparison(stats, axes, "binlog", "memory", needs = "binlog")
  if (!is.null(attr(by_memory, "not_applicable"))) {
    return(list(by_memory = by_memory, by_filesystem = by_memory))
  }
  by_filesystem <- if ("filesystem" %in% axes) {
    cells <- stats$cells[metric == "tps"]
    memory <- intersect("memory", axes)
    group <- varying_axes(cells, setdiff(axes, c("binlog", memory, "filesystem")))
    rows <- c(group, "binlog", memory)
    wide <- pivot_axis(cells, rows, "filesystem", "median")
    order_by_axes(wide, rows)
    setattr(wide, "group_by", group)
  } else {
    not_applicable_table(not_applicable("filesystem"))
  }
  list(by_memory = by_memory, by_filesystem = by_filesystem)
}

# One row per database cell: repetitions and the medians of the final figures.
efficiency_table <- function(summary, axes) {
  if (nrow(summary) == 0) return(not_applicable_table(NO_DATABASE_CELLS))
  summary <- copy(summary)
  for (col in setdiff(EFFICIENCY_COLUMNS, names(summary))) set(summary, j = col, value = NA_real_)  # older tables
  out <- summary[, c(list(reps = .N), lapply(.SD, median_or_na)), by = axes,
                 .SDcols = EFFICIENCY_COLUMNS]
  if (all(is.na(out$class_util_pct))) out[, class_util_pct := NULL]  # no cell on a device class
  order_by_axes(out, axes)
  out[]
}

EFFICIENCY_PREAMBLE <- paste(
  "One row per database cell; medians over repetitions of the final figures.",
  "tps: transactions/s; lat_p95_ms: 95th percentile latency (ms); hit_ratio:",
  "share of page reads served from memory (0..1); kb_read_per_txn,",
  "kb_written_per_txn: device KB per transaction (iostat); log_kb_per_txn:",
  "KB the engine wrote to its own log per transaction (InnoDB's redo log,",
  "MyRocks' WAL, PostgreSQL's WAL; the server's counters); binlog_kb_per_txn:",
  "KB written to the binary log per transaction (MariaDB; 0 without one); cpu_us_per_txn:",
  "CPU microseconds per transaction (vmstat us + sy: the whole host); cs_per_txn:",
  "context switches per transaction (vmstat cs: the whole host, the client's too);",
  "server_cpu_us_per_txn: CPU microseconds of the servers' own processes per",
  "transaction (every node's, in a topology; their /proc/<pid>/stat totals at",
  "the window's start and end, else the per-second sampler's); server_kb_read_per_txn,",
  "server_kb_written_per_txn: KB the servers' own processes read from and",
  "wrote to the block layer per transaction (their /proc/<pid>/io totals at",
  "the window's start and end; 0 on tmpfs); datadir_mb_start,",
  "datadir_mb_end: data directory size (MB) at the start and end;",
  "memory_limit_mb: the server's memory cap (MB), NA when none; class_util_pct",
  "(only when a cell is on a device class): the class's utilisation (%): per second,",
  "the largest share of one of the class's caps the capped device's rates reached,",
  "its IOs counted as the device's throttle charged them; mean over the measured",
  "seconds, NA without a class."
)

# The md lines of one table: its note, or its preamble and (sectioned) table.
table_md_lines <- function(dt, preamble = attr(dt, "preamble")) {
  note <- attr(dt, "not_applicable")
  if (!is.null(note)) return(c(note, ""))
  c(if (length(preamble)) c(preamble, ""),
    md_table_lines(dt, group_by = attr(dt, "group_by")))
}

binlog_md_lines <- function(tables) {
  c(COMPARED_TPS, "",
    "## tps by memory and binlog", "", table_md_lines(tables$by_memory),
    "## tps by binlog, memory and filesystem", "",
    table_md_lines(tables$by_filesystem))
}

rule_db_tables <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)

  axes <- axes_param(params)
  all_reps <- read_database_summary(input[["summary"]], axes)
  summary <- database_rows(all_reps)
  provenance <- read_provenance(input[["provenance"]])
  caption <- if (length(provenance)) caption_text(provenance) else NULL
  log_line("%d database repetitions (%d rows of other tools left out), axes: %s",
           nrow(summary), nrow(all_reps) - nrow(summary), paste(axes, collapse = ", "))
  check_database_reps(summary, axes)

  stats <- read_statistics(input, axes)
  engine_memory <- engine_memory_table(stats, axes)
  binlog <- binlog_tables(stats, axes)
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
