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

rule_recovery <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)

  axes <- axes_param(params)
  recovery <- read_table(input[["recovery"]], axes, c("rep", "index", "action", "at_s"))
  caption <- caption_text(read_provenance(input[["provenance"]]))
  cols <- setdiff(names(recovery)[vapply(recovery, is.numeric, TRUE)],
                  c(axes, "rep", "index", "at_s", "for_s"))
  table <- recovery[, c(list(reps = .N), lapply(.SD, median_or_na)),
                    by = c(axes, "index", "action", "target", "at_s", "for_s"), .SDcols = cols]
  keep <- names(table)[vapply(names(table), function(n) !all(is.na(table[[n]])), TRUE) |
                         names(table) %in% c(axes, "target", "for_s")]
  table <- table[, ..keep]
  order_by_axes(table, axes)
  log_line("%d events in %d repetitions", nrow(table), nrow(recovery))
  write_csv(table, output[["table_csv"]])
  preamble <- c("# Recovery from timed events",
                "",
                paste("Per event, medians over repetitions. before_tps: median throughput before the",
                      "event; below95_s / below50_s: seconds under 95% / 50% of it after the event;",
                      "recovered_s: seconds from the event until back within 95% for 3 s in a row",
                      "(empty: never); lost_tx: transactions short of before_tps until then;",
                      "worst_lat_*: the worst per-second latency after the event; lag_peak_s,",
                      "catch_up_s: replica lag peak and seconds until replicas were back;",
                      "sync_off_s: seconds the primary did not wait for a replica; unacked_tx:",
                      "commits no replica acknowledged."))
  write_md_table(table, output[["table_md"]], preamble = preamble, caption = caption)
  invisible(table)
}
