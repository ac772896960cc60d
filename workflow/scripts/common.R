# Shared helpers for dbsweep's R scripts (tables.R, plots.R, db_tables.R,
# db_plots.R).
#
# Reading the aggregate step's tables, the checks on them, the order of axis
# values, one ggplot2 theme for the whole project, the provenance caption,
# markdown tables and PNG output.
# Sourced by the scripts when Snakemake runs them, and by the tests.

suppressPackageStartupMessages({
  library(data.table)
  library(ggplot2)
})

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
                  "baseline", "axis_value", "verdict", "test", "source", "host")
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
  as_text <- intersect(header, c(setdiff(axes, "threads"), TEXT_COLUMNS))
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

read_system <- function(path, axes) {
  read_table(path, axes, required = SYSTEM_COLUMNS)
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
# second is recorded twice. Returns the per-repetition counts.
check_sample_counts <- function(summary, samples, axes) {
  keys <- c(axes, "rep")
  dup <- samples[, .N, by = c(keys, "second")][N > 1]
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

# Axes whose value differs between rows.
varying_axes <- function(dt, axes) {
  axes[vapply(axes, function(a) uniqueN(dt[[a]]) > 1, TRUE)]
}

# "filesystem = ext4, threads = 4": the axes that are the same in every row,
# said once instead of on every label; NULL when all vary.
fixed_axes_text <- function(dt, axes) {
  fixed <- setdiff(axes, varying_axes(dt, axes))
  if (!length(fixed) || nrow(dt) == 0) return(NULL)
  values <- vapply(fixed, function(a) as.character(dt[[a]][1]), "")
  paste(sprintf("%s = %s", fixed, values), collapse = ", ")
}

NO_DATABASE_CELLS <- "not applicable: this study has no database cells (tool sysbench)"

# What a table or plot says when the study cannot give it.
not_applicable <- function(missing) {
  if (length(missing) == 0) return(NULL)
  sprintf("not applicable: this study has no %s",
          paste(sprintf("%s axis", missing), collapse = " and no "))
}

# ---------------------------------------------------------------------------
# Order of axis values

# Sizes as servers read them ("64M", "1G", "512k", "2GiB", "1048576"), in
# bytes with binary multiples; NA where x is not a size.
size_bytes <- function(x) {
  x <- trimws(as.character(x))
  m <- regmatches(x, regexec("^([0-9]+(\\.[0-9]+)?)\\s*([kKmMgGtTpP]?)(i?[bB])?$", x))
  vapply(m, function(parts) {
    if (length(parts) == 0) return(NA_real_)
    power <- match(toupper(parts[4]), c("K", "M", "G", "T", "P"), nomatch = 0L)
    as.numeric(parts[2]) * 1024^power
  }, 0)
}

# Values some axes take, in the order people read them (baselines first).
AXIS_ORDER <- list(
  engine = c("innodb", "myrocks", "postgresql"),
  binlog = c("off", "sync0", "sync1", "sync1000", "sync10000"),
  durability = c("default", "tuned", "unsafe"),
  isolation = c("RR", "RC")
)

# Text with the numbers in it compared as numbers: "sync2" < "sync10".
natural_order <- function(x) {
  number <- suppressWarnings(as.numeric(sub("^.*?([0-9]+(\\.[0-9]+)?)$", "\\1", x,
                                                perl = TRUE)))
  number[!grepl("[0-9]$", x)] <- -Inf
  prefix <- sub("[0-9]+(\\.[0-9]+)?$", "", x)
  order(prefix, number, x, method = "radix")
}

# The distinct values of an axis (NA left out) in reading order: the known
# order of the axis first; then numbers by value, sizes by bytes (memory
# 64M < 256M < 1G), other text naturally.
axis_levels <- function(x, axis = "") {
  values <- unique(as.character(x[!is.na(x)]))
  if (length(values) == 0) return(character())
  known <- AXIS_ORDER[[axis]]
  first <- known[known %in% values]
  rest <- setdiff(values, first)
  if (length(rest)) {
    numbers <- suppressWarnings(as.numeric(rest))
    bytes <- size_bytes(rest)
    rest <- if (!anyNA(numbers)) {
      rest[order(numbers)]
    } else if (!anyNA(bytes)) {
      rest[order(bytes, rest)]
    } else {
      rest[natural_order(rest)]
    }
  }
  c(first, rest)
}

axis_factor <- function(x, axis) {
  factor(as.character(x), levels = axis_levels(x, axis))
}

# Axis columns as factors in reading order (for plots and dcast), and back.
with_axis_factors <- function(dt, cols) {
  dt <- copy(dt)
  for (a in cols) set(dt, j = a, value = axis_factor(dt[[a]], a))
  dt
}

without_axis_factors <- function(dt, cols) {
  for (a in intersect(cols, names(dt))) {
    value <- as.character(dt[[a]])
    if (a %in% INTEGER_COLUMNS) value <- as.integer(value)
    set(dt, j = a, value = value)
  }
  dt
}

# Sorts dt in place by the given axes, each in reading order (NA last).
order_by_axes <- function(dt, cols) {
  if (length(cols) == 0 || nrow(dt) == 0) return(invisible(dt))
  ranks <- paste0(".rank_", seq_along(cols))
  for (i in seq_along(cols)) {
    x <- dt[[cols[i]]]
    set(dt, j = ranks[i], value = match(as.character(x), axis_levels(x, cols[i])))
  }
  setorderv(dt, ranks, na.last = TRUE)
  dt[, (ranks) := NULL]
  invisible(dt)
}

# "engine=innodb, rate=100": a row's values of the axes that vary ("all" when
# none does).
configuration_label <- function(dt, vary) {
  if (!length(vary)) return(rep("all", nrow(dt)))
  parts <- lapply(vary, function(a) paste0(a, "=", dt[[a]]))
  do.call(paste, c(parts, sep = ", "))
}

# The varying axes a baseline compares along: those params$baseline names, or
# every varying axis when it names none. The other varying axes form groups,
# each compared with its own baseline row.
baseline_axes <- function(vary, baseline = list()) {
  named <- intersect(names(baseline), vary)
  if (length(named)) named else vary
}

# Whether each row is a baseline row: every axis of `vary` at its baseline
# value (params$baseline's, else the axis's first value).
is_baseline <- function(dt, vary, baseline = list()) {
  base <- rep(TRUE, nrow(dt))
  for (axis in vary) {
    base <- base & dt[[axis]] == baseline_value(dt[[axis]], axis, baseline)
  }
  base
}

# Long to wide: one row per combination of `rows`, one column per value of
# `col`, both in reading order (memory by size); rows' columns keep their type.
pivot_axis <- function(dt, rows, col, value) {
  dt <- with_axis_factors(dt, c(rows, col))
  lhs <- if (length(rows)) paste(sprintf("`%s`", rows), collapse = " + ") else "."
  wide <- dcast(dt, stats::as.formula(sprintf("%s ~ `%s`", lhs, col)),
                value.var = value)
  if (!length(rows)) wide[, "." := NULL]
  without_axis_factors(wide, rows)
}

# The value of an axis the others are compared with: params$baseline's, or
# the axis's first value in reading order (for engine: innodb, myrocks,
# postgresql, the first present).
baseline_value <- function(values, axis, baseline = list()) {
  present <- axis_levels(values, axis)
  chosen <- if (axis %in% names(baseline)) baseline[[axis]] else NULL
  if (is.null(chosen) || length(chosen) == 0) return(present[1])
  chosen <- as.character(unlist(chosen))[1]
  if (!chosen %in% present) {
    stop(sprintf("params$baseline: %s = %s is not in the data (%s)", axis,
                 chosen, paste(present, collapse = ", ")))
  }
  chosen
}

# ---------------------------------------------------------------------------
# Plots

# Okabe-Ito, reordered so the first colours are the most distinct on white.
OKABE_ITO <- c("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
               "#56B4E9", "#000000", "#F0E442")

dbsweep_palette <- function(n) {
  if (n <= length(OKABE_ITO)) return(OKABE_ITO[seq_len(n)])
  grDevices::hcl.colors(n, "viridis")
}

scale_colour_dbsweep <- function(...) {
  discrete_scale("colour", "dbsweep", dbsweep_palette, ...)
}

scale_fill_dbsweep <- function(...) {
  discrete_scale("fill", "dbsweep", dbsweep_palette, ...)
}

theme_dbsweep <- function(base_size = 11) {
  theme_bw(base_size = base_size) +
    theme(
      panel.grid.minor = element_blank(),
      strip.background = element_rect(fill = "grey92", colour = NA),
      legend.position = "bottom",
      plot.title.position = "plot",
      plot.caption.position = "plot",
      plot.caption = element_text(hjust = 0, colour = "grey35",
                                  size = rel(0.75)),
      plot.subtitle = element_text(colour = "grey25")
    )
}

# The caption under every plot: where and with what the numbers were made.
caption_text <- function(provenance) {
  field <- function(name) {
    v <- provenance[[name]]
    if (is.null(v) || length(v) == 0 || all(is.na(v)) || identical(v, "")) {
      return("unknown")
    }
    paste(as.character(v), collapse = " ")
  }
  machine <- sprintf("host %s, CPU %s, kernel %s", field("host"), field("cpu"),
                     field("kernel"))
  if (!is.null(provenance[["memory_gb"]])) {
    machine <- sprintf("%s, %s GB RAM", machine,
                       format(round(as.numeric(provenance[["memory_gb"]]), 1)))
  }
  tools <- unique(unlist(provenance[["tools"]]))
  tools <- if (length(tools)) paste(tools, collapse = ", ") else "unknown"
  software <- sprintf("tools: %s", tools)
  if (!is.null(provenance[["study"]])) {
    software <- sprintf("%s; study: %s", software, field("study"))
  }
  paste(machine, software, sep = "\n")
}

# 12,345 on axes.
thousands <- function(x) {
  format(x, big.mark = ",", scientific = FALSE, trim = TRUE)
}

# A plot that says there is nothing to draw, so the rule still has its output.
empty_plot <- function(title, message, caption) {
  ggplot() +
    annotate("text", x = 0, y = 0, label = message, size = 4) +
    labs(title = title, caption = caption, x = NULL, y = NULL) +
    theme_dbsweep() +
    theme(axis.text = element_blank(), axis.ticks = element_blank())
}

# A plot kind the data cannot support: why, instead of a ggplot. save_plots()
# draws the reason as the image and lists it in skipped_plots.csv.
skipped_plot <- function(reason) {
  structure(list(reason = reason), class = "dbsweep_skipped")
}

is_skipped_plot <- function(p) inherits(p, "dbsweep_skipped")

# Saves every plot of the named list `plots` to output[[name]] (a skipped one
# as an image saying why) and returns the skipped ones: data.table(plot,
# reason), the rows of skipped_plots.csv.
save_plots <- function(plots, output, caption, titles = list()) {
  skipped <- list()
  for (name in names(plots)) {
    p <- plots[[name]]
    if (is_skipped_plot(p)) {
      skipped[[name]] <- data.table(plot = name, reason = p$reason)
      title <- if (is.null(titles[[name]])) name else titles[[name]]
      p <- empty_plot(title, paste("skipped:", p$reason), caption)
    }
    size <- attr(p, "size")
    if (is.null(size)) size <- c(width = 8, height = 5)
    save_plot(p, output[[name]], width = size[["width"]], height = size[["height"]])
  }
  if (!length(skipped)) return(data.table(plot = character(), reason = character()))
  rbindlist(skipped)
}

save_plot <- function(p, path, width = 8, height = 5, dpi = 110) {
  dir.create(dirname(path), recursive = TRUE, showWarnings = FALSE)
  type <- if (capabilities("cairo")) "cairo" else getOption("bitmapType")
  grDevices::png(path, width = width, height = height, units = "in",
                 res = dpi, type = type)
  on.exit(grDevices::dev.off())
  print(p)
  invisible(path)
}

# ---------------------------------------------------------------------------
# Markdown tables

# Numbers as a person reads them: integers as they are; other values to three
# significant digits, those of 1000 and more rounded with thousands separators.
format_number <- function(x) {
  out <- rep("NA", length(x))
  ok <- !is.na(x)
  if (is.integer(x)) {
    out[ok] <- as.character(x[ok])
    return(out)
  }
  out[ok & !is.finite(x)] <- as.character(x[ok & !is.finite(x)])
  ok <- is.finite(x)
  r <- signif(x, 3)
  big <- ok & abs(r) >= 1000
  small <- ok & !big
  out[big] <- formatC(round(x[big]), format = "d", big.mark = ",")
  v <- r[small]
  digits <- pmax(0, 2 - floor(log10(abs(v))))
  digits[v == 0] <- 0
  text <- character(length(v))
  for (d in unique(digits)) {
    text[digits == d] <- formatC(v[digits == d], format = "f", digits = d)
  }
  text[v == 0] <- "0"
  out[small] <- text
  out
}

md_cells <- function(x) {
  if (is.numeric(x)) return(format_number(x))
  out <- as.character(x)
  out[is.na(out)] <- "NA"
  gsub("|", "\\|", out, fixed = TRUE)
}

md_lines <- function(dt) {
  cols <- names(dt)
  cells <- lapply(dt, md_cells)
  align <- vapply(dt, function(x) if (is.numeric(x)) "---:" else ":---", "")
  row <- function(v) paste0("| ", paste(v, collapse = " | "), " |")
  body <- if (nrow(dt) == 0) character() else {
    paste0("| ", do.call(paste, c(unname(cells), sep = " | ")), " |")
  }
  c(row(cols), row(align), body)
}

# Writes dt as a GitHub pipe table. With group_by, one table per group under a
# "### axis=value, ..." heading, without the group columns. preamble goes
# above, caption (e.g. caption_text(provenance)) below.
write_md_table <- function(dt, path, group_by = NULL, preamble = NULL,
                           caption = NULL) {
  out <- character()
  if (length(preamble)) out <- c(preamble, "")
  out <- c(out, md_table_lines(dt, group_by))
  write_md_lines(out, path, caption)
}

# The lines of write_md_table() without preamble and caption, so that one file
# can hold several tables.
md_table_lines <- function(dt, group_by = NULL) {
  dt <- as.data.table(dt)
  if (!length(group_by)) return(c(md_lines(dt), ""))
  out <- character()
  groups <- unique(dt[, ..group_by])
  for (i in seq_len(nrow(groups))) {
    key <- groups[i]
    part <- dt[key, on = group_by, nomatch = NULL][, !..group_by]
    out <- c(out, paste("###", cell_name(key, group_by)), "", md_lines(part), "")
  }
  out
}

# Writes markdown lines with the caption (if any) in italics below.
write_md_lines <- function(lines, path, caption = NULL) {
  out <- lines
  if (length(caption)) out <- c(out, paste0("_", gsub("\n", "; ", caption), "_"), "")
  dir.create(dirname(path), recursive = TRUE, showWarnings = FALSE)
  writeLines(out, path)
  invisible(path)
}

# ---------------------------------------------------------------------------
# Logging

# The log file Snakemake gives the rule, when run by Snakemake.
snakemake_log <- function() {
  if (exists("snakemake") && length(snakemake@log) > 0) snakemake@log[[1]] else NULL
}

# Sends output and messages (warnings, errors) to the log; returns the
# connection for close_log().
open_log <- function(log) {
  if (is.null(log) || length(log) == 0) return(NULL)
  dir.create(dirname(log), recursive = TRUE, showWarnings = FALSE)
  con <- file(log, open = "wt")
  sink(con)
  sink(con, type = "message")
  con
}

# A progress line for the log (stdout, which open_log() sends to the log).
log_line <- function(fmt, ...) {
  cat(sprintf(fmt, ...), "\n", sep = "")
}

close_log <- function(con) {
  if (is.null(con)) return(invisible())
  sink(type = "message")
  sink()
  close(con)
  invisible()
}

# A CSV table, its folder made if needed.
write_csv <- function(dt, path) {
  dir.create(dirname(path), recursive = TRUE, showWarnings = FALSE)
  fwrite(dt, path)
}
