# Reading the aggregate step's long tables: their column contracts, the
# checks on them, and which repetitions belong to which kind of cell.

# ---------------------------------------------------------------------------
# Inputs

# Columns every table carries besides the axes.
SUMMARY_COLUMNS <- c("rep", "tool", "duration_s", "seconds", "iops",
                     "read_iops", "write_iops", "mibs", "fsyncs",
                     "lat_mean_ms", "lat_p95_ms", "lat_p99_ms", "lat_max_ms")
SAMPLES_COLUMNS <- c("rep", "second", "time", "iops", "mibs", "lat_ms",
                     "lat_pct_ms")
SYSTEM_COLUMNS <- c("rep", "second", "time", "us", "sy", "id", "wa", "bi", "bo",
                    "cs", "device", "r_s", "w_s", "rkb_s", "wkb_s", "r_await",
                    "w_await", "aqu_sz", "util")

COUNTERS_COLUMNS <- c("rep", "second", "time", "name", "value")
# What database cells (tool sysbench) add to the summary and samples.
DATABASE_SUMMARY_COLUMNS <- c("tps", "qps", "transactions", "hit_ratio",
                              "kb_read_per_txn", "kb_written_per_txn",
                              "cpu_us_per_txn", "datadir_mb_start",
                              "datadir_mb_end", "memory_limit_mb")
DATABASE_SAMPLES_COLUMNS <- c("tps", "qps")
# Database cells are those whose workload declares kind "database" (the summary's
# kind column); storage cells share the tables with their database axes empty.

# Columns that are text whatever they look like; every other non-axis column
# is a number (a column that is all NA would otherwise be read as logical).
TEXT_COLUMNS <- c("tool", "kind", "device", "name", "check", "phase", "op", "metric", "ci_method", "axis",
                  "baseline", "axis_value", "verdict", "test", "source", "host", "node", "node_host",
                  "action", "target", "outcome", "error")
INTEGER_COLUMNS <- c("threads", "rep", "second", "seconds")

# The axis names from snakemake@params[["axes"]], checked.
axes_param <- function(params) {
  axes <- as.character(unlist(params[["axes"]]))
  if (length(axes) == 0) stop("params$axes is empty: need the sweep's axis names")
  reserved <- intersect(axes, c(SUMMARY_COLUMNS, SAMPLES_COLUMNS, SYSTEM_COLUMNS))
  if (length(reserved)) {
    stop("params$axes: ", paste(reserved, collapse = ", "),
         " is a measurement column, not an axis")
  }
  if (anyDuplicated(axes)) stop("params$axes: duplicated axis names")
  axes
}

# fread needs R.utils for .gz files; decompress with base R instead.
gunzip_to_temp <- function(path) {
  tmp <- tempfile(fileext = ".csv")
  inp <- gzfile(path, "rb")
  on.exit(close(inp))
  out <- file(tmp, "wb")
  on.exit(close(out), add = TRUE)
  repeat {
    chunk <- readBin(inp, "raw", 1048576L)
    if (length(chunk) == 0) break
    writeBin(chunk, out)
  }
  tmp
}

# Reads one of the aggregate step's CSV tables (gzipped or not). Axis columns
# come back as text (threads as integer) so that cells compare exactly across
# tables; measurement columns come back as numbers. select: only these
# columns besides the axes and the required ones (NULL: all).
read_table <- function(path, axes, required = character(), select = NULL) {
  if (!file.exists(path)) stop(path, ": no such file")
  csv <- path
  if (grepl("\\.gz$", path)) {
    csv <- gunzip_to_temp(path)
    on.exit(unlink(csv), add = TRUE)
  }
  header <- names(fread(csv, nrows = 0L))
  missing <- setdiff(c(axes, required), header)
  if (length(missing)) {
    stop(path, ": missing column(s) ", paste(missing, collapse = ", "))
  }
  if (!is.null(select)) header <- intersect(header, unique(c(axes, required, select)))
  # *_why: the words that say why a figure beside them is empty (events/recovery.py)
  as_text <- intersect(header, c(setdiff(axes, "threads"), TEXT_COLUMNS, grep("_why$", header, value = TRUE)))
  dt <- fread(csv, colClasses = list(character = as_text),
              na.strings = c("", "NA"), select = if (!is.null(select)) header)
  for (col in setdiff(names(dt), as_text)) {
    if (col %in% INTEGER_COLUMNS) {
      set(dt, j = col, value = as.integer(dt[[col]]))
    } else if (!is.numeric(dt[[col]])) {
      set(dt, j = col, value = as.numeric(dt[[col]]))
    }
  }
  dt[]
}

read_summary <- function(path, axes) {
  read_table(path, axes, required = SUMMARY_COLUMNS)
}

read_samples <- function(path, axes) {
  read_table(path, axes, required = SAMPLES_COLUMNS)
}

# summary and samples without the repetitions of cells whose workload has no
# per-second series (per_second 0: insert's phases, query's executions have
# tables and plots of their own): what the shared statistics and figures are
# drawn from.
per_second_cells <- function(summary, samples, axes) {
  own <- summary[per_second == 0, c(axes, "rep"), with = FALSE]
  if (!nrow(own)) return(list(summary = summary, samples = samples))
  list(summary = summary[per_second != 0],
       samples = samples[!own, on = c(axes, "rep")])
}

# The rows of each repetition's own host (node empty): a placed topology's
# nodes' hosts have rows of their own (node, node_host), which the run's CPU
# and device figures do not mix in.
read_system <- function(path, axes) {
  dt <- read_table(path, axes, required = SYSTEM_COLUMNS)
  if ("node" %in% names(dt)) dt <- dt[is.na(node) | node == ""]
  dt
}

read_counters <- function(path, axes) {
  read_table(path, axes, required = COUNTERS_COLUMNS)
}

read_database_summary <- function(path, axes) {
  read_table(path, axes, required = c(SUMMARY_COLUMNS, DATABASE_SUMMARY_COLUMNS))
}

read_database_samples <- function(path, axes) {
  read_table(path, axes, required = c(SAMPLES_COLUMNS, DATABASE_SAMPLES_COLUMNS))
}

read_provenance <- function(path) {
  if (is.null(path) || length(path) == 0) return(list())
  jsonlite::fromJSON(path, simplifyVector = TRUE)
}

mean_or_na <- function(x) {
  if (all(is.na(x))) NA_real_ else mean(x, na.rm = TRUE)
}

median_or_na <- function(x) {
  if (all(is.na(x))) NA_real_ else as.numeric(stats::median(x, na.rm = TRUE))
}

# "filesystem=ext4, threads=4" for messages and headings.
cell_name <- function(row, axes) {
  paste(sprintf("%s=%s", axes, vapply(axes, function(a) as.character(row[[a]]), "")),
        collapse = ", ")
}

# ---------------------------------------------------------------------------
# Checks

# Share of the configured duration a repetition must have samples for. The
# tools' interval reporters drop the last, partial second, so the count is
# rounded down (a 2-second run with 1 sample passes, one with 0 does not).
MIN_SAMPLE_SHARE <- 0.8

# Stops when a repetition has fewer per-second samples than
# MIN_SAMPLE_SHARE * duration_s (in the samples table or by the summary's own
# count), when samples belong to no repetition of the summary, or when a
# second is recorded twice (unless `duplicates` is FALSE: the caller knows
# there are none). Returns the per-repetition counts.
check_sample_counts <- function(summary, samples, axes, duplicates = TRUE) {
  keys <- c(axes, "rep")
  dup <- if (duplicates) samples[, .N, by = c(keys, "second")][N > 1] else data.table()
  if (nrow(dup)) {
    stop(sprintf("cell %s rep %d: second %d appears %d times in samples",
                 cell_name(dup[1], axes), dup$rep[1], dup$second[1], dup$N[1]))
  }
  orphans <- samples[!summary, on = keys, unique(.SD), .SDcols = keys]
  if (nrow(orphans)) {
    stop(sprintf("cell %s rep %d: per-second samples but no row in summary",
                 cell_name(orphans[1], axes), orphans$rep[1]))
  }
  counts <- samples[, .(n_samples = .N), by = keys]
  reps <- counts[summary[, c(keys, "duration_s", "seconds"), with = FALSE],
                 on = keys]
  reps[is.na(n_samples), n_samples := 0L]
  reps[, n_checked := pmin(n_samples, seconds, na.rm = TRUE)]
  reps[, needed := pmax(1, floor(MIN_SAMPLE_SHARE * duration_s))]
  no_duration <- reps[!is.na(duration_s) & duration_s <= 0]
  if (nrow(no_duration)) {
    stop(sprintf("cell %s rep %d: duration_s is %s, cannot check its samples",
                 cell_name(no_duration[1], axes), no_duration$rep[1],
                 format(no_duration$duration_s[1])))
  }
  # A run without a configured duration (fio until `size` is done) is not checked.
  short <- reps[!is.na(duration_s) & n_checked < needed]
  if (nrow(short)) {
    s <- short[1]
    stop(sprintf(paste0(
      "cell %s rep %d: %d per-second samples (samples table %d, summary %s) ",
      "for duration_s = %s; need at least %d (%d%%). %d repetition(s) short."),
      cell_name(s, axes), s$rep, s$n_checked, s$n_samples,
      format(s$seconds), format(s$duration_s), as.integer(s$needed),
      as.integer(100 * MIN_SAMPLE_SHARE), nrow(short)))
  }
  reps[]
}

# ---------------------------------------------------------------------------
# Database cells

# The summary's repetitions of database cells with a per-second series.
is_database <- function(summary) {
  summary$kind == "database" & summary$per_second != 0
}

database_rows <- function(summary) {
  summary[is_database(summary)]
}

# Rows of a per-second table (samples, system, counters) without those of the
# summary's other tools' repetitions. Rows that belong to no repetition stay,
# so check_sample_counts() still finds them.
drop_other_tools <- function(dt, summary, axes) {
  keys <- c(axes, "rep")
  others <- unique(summary[!is_database(summary), ..keys])
  if (nrow(others) == 0) return(dt)
  dt[!others, on = keys]
}


# The statistics rule's outputs a table compares cells by: list(cells =
# cell_stats.csv, comparisons = comparisons.csv, empty when nothing compares).
read_statistics <- function(input, axes) {
  cells <- read_table(input[["cell_stats_csv"]], axes, c("metric", "reps", "median"))
  path <- input[["comparisons_csv"]]
  comparisons <- if (file.size(path) > 1) read_table(path, axes) else data.table()
  list(cells = cells, comparisons = comparisons)
}
