# Baselines: which axis value the others are compared with.

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


# The one ratio of the analysis: x / base, NA where base is missing or not
# positive. Every table relative to a baseline divides with it.
baseline_ratio <- function(x, base) {
  out <- as.numeric(x / base)
  out[is.na(out) | !(rep_len(base, length(out)) > 0)] <- NA_real_
  out
}

# Rows of dt (one per configuration and `by`, column `value`) with columns
# configuration (the values of the varying axes), baseline (whether the row is
# the baseline configuration) and relative (value / the value of the baseline
# row with the same `by` and the same axes that are not compared).
relative_to_baseline <- function(dt, vary, baseline, by, value = "value") {
  compared <- baseline_axes(vary, baseline)
  groups <- setdiff(vary, compared)
  dt[, configuration := configuration_label(dt, vary)]
  dt[, baseline := is_baseline(dt, compared, baseline)]
  ref <- dt[baseline == TRUE, c(groups, by, value), with = FALSE]
  setnames(ref, value, ".base")
  out <- merge(dt, ref, by = c(groups, by), all.x = TRUE)
  set(out, j = "relative", value = baseline_ratio(out[[value]], out$.base))
  out[, .base := NULL]
  out[]
}
