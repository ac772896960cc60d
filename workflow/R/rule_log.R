# A rule's log: output and messages of a rule function go to Snakemake's log.

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
