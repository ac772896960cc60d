# Timed events (the events axis): their spans on every per-second plot, named,
# and the recovery table (results/tables/recovery.{csv,md}).
#
# Snakemake (rule recovery): input summary, recovery, events, provenance;
# output table_csv, table_md; params axes; log.

EVENT_SPAN_COLOUR <- "#E69F00"
# An event without a `for` (a kill, a statement) is drawn this wide (s).
EVENT_MARK_S <- 0.3

# The events table of the aggregate step, or an empty table when the study
# has none (or was collected before there were events).
read_events <- function(path, axes) {
  if (is.null(path) || length(path) == 0 || !file.exists(path)) return(data.table())
  dt <- read_table(path, axes, c("rep", "index", "action", "actual_s"))
  dt[]
}

# Per cell and event: its span (the median over repetitions of when its
# action and its undo happened, s into the window) and its name.
event_spans <- function(events, axes) {
  if (nrow(events) == 0) return(data.table())
  by <- c(axes, "index")
  first <- events[, .(action = action[1L], target = target[1L]), by = c(by, "rep")]
  start <- events[first, on = c(by, "rep", "action"), nomatch = NULL][
    , .(xmin = median(actual_s)), by = by]
  end <- events[!first, on = c(by, "rep", "action")][, .(xmax = median(actual_s)), by = by]
  spans <- merge(start, end, by = by, all.x = TRUE)
  names <- unique(first[, c(by, "action", "target"), with = FALSE], by = by)
  spans <- merge(spans, names, by = by)
  spans[is.na(xmax), xmax := xmin + EVENT_MARK_S]
  spans[, label := fifelse(is.na(target) | target == "", action, paste(action, target))]
  spans[]
}

# p with the event spans shaded and named; spans carry the columns p facets by.
with_event_spans <- function(p, spans) {
  if (is.null(spans) || nrow(spans) == 0) return(p)
  p +
    geom_rect(data = spans, aes(xmin = xmin, xmax = xmax, ymin = -Inf, ymax = Inf),
              inherit.aes = FALSE, fill = EVENT_SPAN_COLOUR, alpha = 0.25) +
    geom_text(data = spans, aes(x = xmin, y = Inf, label = label), inherit.aes = FALSE,
              hjust = 0, vjust = 1.2, size = 2.6, colour = "grey20")
}

# Spans of the cells in dt, with dt's own facet columns (e.g. a cell label)
# joined on the axes.
spans_for <- function(spans, dt, axes, columns = character()) {
  if (nrow(spans) == 0) return(spans)
  out <- copy(spans)
  for (a in axes) out[, (a) := as.character(get(a))]
  keys <- unique(as.data.table(dt)[, c(axes, columns), with = FALSE])
  for (a in axes) keys[, (a) := as.character(get(a))]
  out <- merge(out, keys, by = axes)
  for (a in intersect(names(dt), axes)) {
    if (is.factor(dt[[a]])) out[, (a) := factor(get(a), levels = levels(dt[[a]]))]
  }
  out[]
}

# A recovery figure and the column that says why it is empty when the window did
# not show its condition (events/recovery.py): such a repetition's figure is
# larger than any seen (later, longer), so it counts as +Inf in the median.
RECOVERY_WHY <- c(recovered_s = "recovered_why", lag_peak_s = "lag_peak_why",
                  catch_up_s = "catch_up_why", worst_lat_pct_ms = "worst_lat_why",
                  worst_lat_max_ms = "worst_lat_why")

# The median of x over repetitions, a repetition with a why counted as +Inf:
# NA when that median is one no repetition saw.
censored_median <- function(x, why) {
  unseen <- !is.na(why) & why != ""
  x[unseen] <- Inf
  m <- median_or_na(x)
  if (is.infinite(m)) NA_real_ else m
}

# The whys of a group's repetitions in one text: the first one's words and,
# with several repetitions, in how many of them ("" when none had one).
why_text <- function(why) {
  seen <- why[!is.na(why) & why != ""]
  if (length(seen) == 0) return(NA_character_)
  if (length(why) == 1) return(seen[1])
  sprintf("%s (%d of %d repetitions)", seen[1], length(seen), length(why))
}

rule_recovery <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)

  axes <- axes_param(params)
  recovery <- read_table(input[["recovery"]], axes, c("rep", "index", "action", "at_s"))
  caption <- caption_text(read_provenance(input[["provenance"]]))
  by <- c(axes, "index", "action", "target", "at_s", "for_s")
  whys <- grep("_why$", names(recovery), value = TRUE)
  cols <- setdiff(names(recovery)[vapply(recovery, is.numeric, TRUE)], c(axes, "rep", "index", "at_s", "for_s"))
  censored <- intersect(names(RECOVERY_WHY)[RECOVERY_WHY %in% whys], cols)
  table <- recovery[, c(list(reps = .N), lapply(.SD, median_or_na)), by = by, .SDcols = setdiff(cols, censored)]
  for (f in censored) {
    medians <- recovery[, .(v = censored_median(get(f), get(RECOVERY_WHY[[f]]))), by = by]
    table[medians, (f) := i.v, on = by]
  }
  for (w in whys) {
    text <- recovery[, .(v = why_text(get(w))), by = by]
    table[text, (w) := i.v, on = by]
  }
  setcolorder(table, intersect(c(by, "reps", names(recovery)), names(table)))
  said <- function(n) !all(is.na(table[[n]]))
  # a figure empty in every row stays when its why says why
  kept <- function(n) said(n) || (n %in% censored && said(RECOVERY_WHY[[n]]))
  keep <- names(table)[vapply(names(table), kept, TRUE) | names(table) %in% c(axes, "target", "for_s")]
  table <- table[, ..keep]
  order_by_axes(table, axes)
  log_line("%d events in %d repetitions", nrow(table), nrow(recovery))
  write_csv(table, output[["table_csv"]])
  preamble <- c("# Recovery from timed events",
                "",
                paste("Per event, medians over repetitions. before_tps: median throughput before the",
                      "event; after_s: seconds measured after it; below95_s / below50_s: seconds under",
                      "95% / 50% of before_tps after the event; recovered_s: seconds from the event until",
                      "back within 95% for 3 s in a row; lost_tx: transactions short of before_tps until",
                      "then, or until the window's end; worst_lat_*: the worst per-second latency after",
                      "the event; lag_peak_s: the largest replica lag after the event, once it came down",
                      "from it; lag_end_s: the lag at the window's end; catch_up_s: seconds until replicas",
                      "were back; behind_end: how far the furthest replica was behind at the window's end;",
                      "sync_off_s: seconds the primary did not wait for a replica; unacked_tx: commits no",
                      "replica acknowledged. An empty figure with a *_why beside it is one the window did",
                      "not show (a replica not caught up by its end), counted as later than any seen in",
                      "the median."))
  write_md_table(table, output[["table_md"]], preamble = preamble, caption = caption)
  invisible(table)
}
