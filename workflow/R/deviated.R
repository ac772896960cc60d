# Repetitions whose settings ran otherwise than declared (delivered.py: summary's
# `deviations`, the count of deviated checks of each repetition), and what the
# comparisons do with them: by default they are left out of every comparison
# (analysis.include_deviated: false); kept in, each comparison row they shape is
# marked (`includes_deviated`), so the answer can say so.

# The deviated repetitions: their axes and rep (none in a summary from before
# the checks, which has no deviations column).
deviated_reps <- function(summary, axes) {
  if (!"deviations" %in% names(summary)) return(summary[0, c(axes, "rep"), with = FALSE])
  summary[!is.na(summary$deviations) & summary$deviations > 0, c(axes, "rep"), with = FALSE]
}

# Per comparison row: whether its cell or its baseline cell (the same axes, the
# compared axis at its baseline value) had a deviated repetition.
involves_deviated <- function(comparisons, reps, axes) {
  if (!nrow(comparisons)) return(logical())
  key <- function(columns) do.call(paste, c(columns, sep = "\r"))
  bad <- unique(key(lapply(axes, function(a) as.character(reps[[a]]))))
  own <- lapply(axes, function(a) as.character(comparisons[[a]]))
  base <- lapply(seq_along(axes), function(i) {
    at <- comparisons$axis == axes[[i]]
    replace(own[[i]], at, as.character(comparisons$baseline[at]))
  })
  key(own) %in% bad | key(base) %in% bad
}

# The statistics with deviated repetitions handled: cells gain the count of
# deviated repetitions per cell (all repetitions stay in their statistics);
# comparisons lose every row whose cell or baseline cell had one, unless
# include, which keeps them marked includes_deviated.
with_deviations <- function(s, summary, axes, include = FALSE) {
  reps <- deviated_reps(summary, axes)
  if (!nrow(reps)) return(s)
  counts <- reps[, .(deviated_reps = .N), by = axes]
  s$cells <- counts[s$cells, on = axes]
  s$cells[is.na(deviated_reps), deviated_reps := 0L]
  if (!nrow(s$comparisons)) return(s)
  s$comparisons[, includes_deviated := involves_deviated(s$comparisons, reps, axes)]
  if (!include) {
    n <- sum(s$comparisons$includes_deviated)
    s$comparisons <- s$comparisons[includes_deviated == FALSE]
    log_line("%d comparison rows left out: they involve a cell with a deviated repetition (%d)", n, nrow(reps))
  }
  s
}
