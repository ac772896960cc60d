# Shared helpers for dbsweep's R scripts (tables.R, plots.R).
#
# Reading the aggregate step's tables, one ggplot2 theme for the whole
# project, the provenance caption, markdown tables and PNG output.
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

# Columns that are text whatever they look like; every other non-axis column
# is a number (a column that is all NA would otherwise be read as logical).
TEXT_COLUMNS <- c("tool", "device")
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
# tables; measurement columns come back as numbers.
read_table <- function(path, axes, required = character()) {
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
  as_text <- intersect(header, c(setdiff(axes, "threads"), TEXT_COLUMNS))
  dt <- fread(csv, colClasses = list(character = as_text),
              na.strings = c("", "NA"))
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

read_system <- function(path, axes) {
  read_table(path, axes, required = SYSTEM_COLUMNS)
}

read_provenance <- function(path) {
  if (is.null(path) || length(path) == 0) return(list())
  jsonlite::fromJSON(path, simplifyVector = TRUE)
}

mean_or_na <- function(x) {
  if (all(is.na(x))) NA_real_ else mean(x, na.rm = TRUE)
}

# "filesystem=ext4, threads=4" for messages and headings.
cell_name <- function(row, axes) {
  paste(sprintf("%s=%s", axes, vapply(axes, function(a) as.character(row[[a]]), "")),
        collapse = ", ")
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
  tools <- unlist(provenance[["tools"]])
  tools <- if (length(tools)) paste(tools, collapse = ", ") else "unknown"
  software <- sprintf("tools: %s", tools)
  if (!is.null(provenance[["study"]])) {
    software <- sprintf("%s; study: %s", software, field("study"))
  }
  paste(machine, software, sep = "\n")
}

# A plot that says there is nothing to draw, so the rule still has its output.
empty_plot <- function(title, message, caption) {
  ggplot() +
    annotate("text", x = 0, y = 0, label = message, size = 4) +
    labs(title = title, caption = caption, x = NULL, y = NULL) +
    theme_dbsweep() +
    theme(axis.text = element_blank(), axis.ticks = element_blank())
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
  out[small] <- vapply(r[small], function(v) {
    if (v == 0) return("0")
    formatC(v, format = "f", digits = max(0, 2 - floor(log10(abs(v)))))
  }, "")
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
  body <- vapply(seq_len(nrow(dt)),
                 function(i) row(vapply(cells, `[`, "", i)), "")
  c(row(cols), row(align), body)
}

# Writes dt as a GitHub pipe table. With group_by, one table per group under a
# "### axis=value, ..." heading, without the group columns. preamble goes
# above, caption (e.g. caption_text(provenance)) below.
write_md_table <- function(dt, path, group_by = NULL, preamble = NULL,
                           caption = NULL) {
  dt <- as.data.table(dt)
  out <- character()
  if (length(preamble)) out <- c(preamble, "")
  if (length(group_by)) {
    groups <- unique(dt[, ..group_by])
    for (i in seq_len(nrow(groups))) {
      key <- groups[i]
      part <- dt[key, on = group_by, nomatch = NULL][, !..group_by]
      out <- c(out, paste("###", cell_name(key, group_by)), "", md_lines(part), "")
    }
  } else {
    out <- c(out, md_lines(dt), "")
  }
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
