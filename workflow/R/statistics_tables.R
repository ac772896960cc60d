# Statistics of every cell, storage and database alike (statistics.R has the
# method): the steady-state window and stalls of each repetition, per-cell
# statistics with a confidence interval of the median, and ratios against the
# baseline value of each axis, with pivot tables a person reads.
#
# Snakemake: input summary, samples (+ optional provenance); output
# steady_state (csv), cell_stats_csv, cell_stats_md, comparisons_csv,
# comparisons_md; params axes, baseline (axis -> value, may be empty),
# analysis (trim_s, steady_state, stall_share); log.
#
# Metrics: throughput is tps for sysbench OLTP cells, iops for the others;
# latency is lat_ms (fio's per-second mean) or lat_p95_ms (sysbench's
# per-interval 95th percentile). The window is found on the throughput and
# used for both.

# Per-cell statistics of both metrics, long (column metric), with the
# repetitions' steady-state flags and stalls, from cell_series()' series and
# cells and steady_windows() on .cell. attr "parts": per metric, the
# cell_stats() of its cells (with their bootstrap draws and pooled noise) for
# comparisons_table(), attrs cells (each row's .cell) and basis (what its draws are drawn from).
all_cell_stats <- function(series, windows, cells, axes, settings,
                           win = window_samples(series, windows, c(".cell", "rep"), "throughput")) {
  flags <- windows[, .(not_steady = sum(steady %in% FALSE),
                       stall_seconds = sum(stall_seconds),
                       longest_stall_s = max(longest_stall_s)), by = .cell]
  parts <- list()
  for (m in c("throughput", "latency")) {
    name_col <- paste0(m, "_metric")
    for (metric_name in unique(cells[[name_col]])) {
      ids <- cells$.cell[cells[[name_col]] == metric_name]
      every <- length(ids) == nrow(cells)
      part <- if (every && !anyNA(win[[m]])) win else if (every) win[!is.na(get(m))]
              else win[.cell %in% ids & !is.na(get(m))]
      if (nrow(part) == 0) next
      identity <- data.table(.cell = ids, id = identity_text(cells[match(ids, .cell), ..axes], metric_name))
      s <- cell_stats(part, ".cell", m, settings, identity)
      s[, metric := metric_name]
      s[flags, `:=`(not_steady = i.not_steady), on = ".cell"]
      if (m == "throughput") {
        s[flags, `:=`(stall_seconds = i.stall_seconds,
                      longest_stall_s = i.longest_stall_s), on = ".cell"]
      } else {
        s[, `:=`(stall_seconds = NA_integer_, longest_stall_s = NA_integer_)]
      }
      out <- with_cell_axes(s, cells, axes)
      setattr(out, "draws", attr(s, "draws"))
      setattr(out, "noise", attr(s, "noise"))
      setattr(out, "rep_values", attr(s, "rep_values"))
      setattr(out, "basis", attr(s, "basis"))
      setattr(out, "cells", s$.cell)
      parts[[metric_name]] <- out
    }
  }
  stats <- rbindlist(parts, use.names = TRUE)
  setcolorder(stats, c(axes, "metric"))
  setattr(stats, "parts", parts)
  stats
}

# The axes compared with a baseline: those params$baseline names, and every
# other axis with two values or more except workload (different workloads'
# throughputs are not comparable).
compared_axes <- function(cells, axes, baseline = list()) {
  varying <- varying_axes(cells[, ..axes], axes)
  named <- intersect(names(baseline), varying)
  c(named, setdiff(varying, c("workload", named)))
}

# Ratios of every cell to its baseline cell, per compared axis and metric. `store` (statistics_store(), or
# NULL): the bootstrap CIs of the pairs of unchanged cells are read from rule statistics' cache.
comparisons_table <- function(cells, axes, baseline = list(), settings = STATS_DEFAULTS, store = NULL) {
  parts <- attr(cells, "parts")
  out <- list()
  for (axis in compared_axes(cells, axes, baseline)) {
    base <- baseline_value(cells[[axis]], axis, baseline)
    for (metric_name in names(parts)) {
      bounds <- if (!is.null(store)) store_bounds(store, parts[[metric_name]], metric_name, axes, settings)
      r <- ratio_to_baseline(parts[[metric_name]], axes, axis, base, settings$level, bounds)
      if (nrow(r) == 0) next
      r[, metric := metric_name]
      set(r, j = "axis_value", value = as.character(r[[axis]]))
      out[[length(out) + 1L]] <- r
    }
  }
  if (!length(out)) return(data.table())
  dt <- rbindlist(out, use.names = TRUE)
  setcolorder(dt, c("axis", "baseline", "axis_value", "metric", axes))
  dt[]
}

# "1.23 [1.10, 1.35]", followed by "within noise" when it is.
ratio_text <- function(ratio, low, high, verdict) {
  txt <- sprintf("%s [%s, %s]", format_number(ratio), format_number(low),
                 format_number(high))
  txt[is.na(ratio)] <- "NA"
  ifelse(verdict %in% VERDICT_NOISE, paste(txt, "within noise"), txt)
}

# The columns of a comparison that comparison_wide() shows, besides the axes.
COMPARISON_SHOWN <- c("baseline", "axis_value", "ratio", "ratio_low", "ratio_high", "verdict")

# The pivot of one compared axis and metric, read from the statistics rule's
# cell_stats and comparisons so that every table that compares cells gives the
# same ratio and verdict: rows `rows` (default: row_axis()) in sections of the
# other varying axes, one column per value of the axis with the cell's median,
# then per compared value "<value>/<baseline>": with text, the ratio, its CI
# and the noise mark in one cell; without, the ratio as a number and
# "<value>/<baseline> verdict". attrs group_by (the sections), baseline, ratios.
comparison_wide <- function(cells, comparisons, axes, axis, metric_name, rows = NULL,
                            text = TRUE) {
  # only the columns the pivot reads: its factors, dcast and sort copy every column of what they get
  part <- cells[cells$metric == metric_name & !is.na(cells[[axis]]), c(axes, "median"), with = FALSE]
  if (is.null(rows)) rows <- row_axis(part, axes, axis)
  sections <- setdiff(varying_axes(part[, ..axes], axes), c(axis, rows))
  by <- c(sections, rows)
  if (!length(by)) {
    part <- copy(part)[, .all := "all"]
    by <- ".all"
  }
  values <- axis_levels(part[[axis]], axis)
  wide <- pivot_axis(part, by, axis, "median")
  cmp <- data.table()
  if (nrow(comparisons) && "axis" %in% names(comparisons)) {
    keep <- comparisons$axis == axis & comparisons$metric == metric_name
    cmp <- comparisons[keep, intersect(names(comparisons), c(axes, COMPARISON_SHOWN)), with = FALSE]
  }
  base <- if (nrow(cmp)) cmp$baseline[1] else NA_character_
  ratios <- character()
  if (nrow(cmp)) {
    if (".all" %in% by) cmp <- copy(cmp)[, .all := "all"]
    cmp[, name := paste0(axis_value, "/", base)]
    ratios <- intersect(paste0(setdiff(values, base), "/", base), cmp$name)
    cmp[, name := factor(name, levels = ratios)]
    lhs <- paste(sprintf("`%s`", by), collapse = " + ")
    spread <- function(column) {
      w <- dcast(with_axis_factors(cmp, by), stats::as.formula(paste(lhs, "~ name")),
                 value.var = column, drop = c(TRUE, FALSE))
      without_axis_factors(w, by)
    }
    if (text) {
      cmp[, shown := ratio_text(ratio, ratio_low, ratio_high, verdict)]
      ratio_wide <- spread("shown")
    } else {
      ratio_wide <- spread("ratio")
      verdicts <- spread("verdict")
      setnames(verdicts, ratios, paste(ratios, "verdict"))
      ratio_wide <- verdicts[ratio_wide, on = by]
    }
    wide <- ratio_wide[wide, on = by]
    ratio_cols <- if (text) ratios else as.vector(rbind(ratios, paste(ratios, "verdict")))
    setcolorder(wide, c(by, intersect(values, names(wide)), ratio_cols))
  }
  order_by_axes(wide, by)
  if (".all" %in% by) wide[, .all := NULL]
  setattr(wide, "group_by", sections)
  setattr(wide, "baseline", base)
  setattr(wide, "ratios", ratios)
  wide
}

# Why a study has no comparison, in a sentence that is true of it: its only
# varying axis is workload (never compared), or no axis varies.
nothing_compared <- function(cells, axes) {
  varying <- if (nrow(cells)) varying_axes(cells[, ..axes], axes) else character()
  if ("workload" %in% varying) {
    return(paste("Nothing is compared with a baseline: workload is the only axis with two values or",
                 "more, and workloads are not compared (their figures may not share a unit). The",
                 "summary page's answer sets them side by side, each figure with its ratio."))
  }
  paste("Nothing is compared with a baseline: no axis has two values or more. The summary",
        "page's answer gives each cell's own figures with their confidence intervals.")
}

# memo (statistics_md_memo(), or NULL): the table lines of rows as they were in the last run are reused.
comparisons_md_lines <- function(cells, comparisons, axes, settings, memo = NULL) {
  out <- c("# Comparisons with a baseline", "", stats_method(settings), "")
  if (nrow(comparisons) == 0) return(c(out, nothing_compared(cells, axes), ""))
  out <- c(out,
           paste("Each table: the median per-second throughput of every value of the",
                 "axis (columns), then <value>/<baseline>: the ratio with its CI in",
                 "brackets, marked \"within noise\" when the CI contains 1."), "",
           sprintf("Test used: %s.", paste(unique(comparisons$test), collapse = "; ")), "")
  for (axis in unique(comparisons$axis)) {
    keep <- comparisons$axis == axis & comparisons$metric %in% THROUGHPUT_METRICS
    metric_name <- comparisons$metric[keep][1]
    if (is.na(metric_name)) next
    wide <- comparison_wide(cells, comparisons, axes, axis, metric_name)
    group_by <- attr(wide, "group_by")
    body <- memo_body_lines(wide[, setdiff(names(wide), group_by), with = FALSE], memo, paste("comparisons", axis))
    out <- c(out, sprintf("## %s (baseline %s), %s", axis, attr(wide, "baseline"),
                          metric_name), "",
             md_table_lines(wide, group_by, body))
  }
  out
}

# The study's chosen statistics (analysis.statistics) of every metric, one
# row per cell: "<metric> <statistic>" columns, e.g. "tps mean", "tps sd",
# "lat_p95_ms p95"; throughput metrics first.
chosen_statistics <- function(cells, axes, statistics = STATS_DEFAULTS$statistics) {
  statistics <- intersect(as.character(unlist(statistics)), CELL_STATISTICS)
  metrics <- unique(cells$metric)
  metrics <- c(intersect(THROUGHPUT_METRICS, metrics), setdiff(metrics, THROUGHPUT_METRICS))
  rows <- varying_axes(cells, axes)
  if (!length(rows)) rows <- axes
  long <- melt(cells[, c(rows, "metric", statistics), with = FALSE],
               id.vars = c(rows, "metric"), variable.name = "statistic", variable.factor = FALSE)
  long[, column := factor(paste(metric, statistic),
                          levels = as.vector(outer(statistics, metrics, function(s, m) paste(m, s))))]
  wide <- dcast(with_axis_factors(long, rows),
                stats::as.formula(paste(paste(sprintf("`%s`", rows), collapse = " + "), "~ column")),
                value.var = "value", drop = c(TRUE, TRUE))
  wide <- without_axis_factors(wide, rows)
  order_by_axes(wide, rows)
  wide[]
}

cell_stats_md_lines <- function(cells, windows, settings, axes = NULL, memo = NULL) {
  chosen <- if (length(axes)) {
    wide <- chosen_statistics(cells, axes, settings$statistics)
    c("## The study's statistics", "",
      sprintf(paste("Per cell: %s of the per-second values of every metric in the",
                    "steady-state windows (analysis.statistics; units: tps transactions/s,",
                    "iops I/O per s, lat_* ms)."),
              paste(intersect(unlist(settings$statistics), CELL_STATISTICS), collapse = ", ")), "",
      md_lines(wide, memo_body_lines(wide, memo, "chosen")), "",
      "## Every statistic", "")
  }
  shown <- setDT(lapply(cells, identity))  # its columns: copy() would copy attr parts (every cell's draws)
  shown[, ci := sprintf("[%s, %s]", format_number(ci_low), format_number(ci_high))]
  cols <- setdiff(names(shown), c("ci_low", "ci_high", "ci"))
  at <- which(cols == "median")
  shown <- shown[, c(cols[seq_len(at)], "ci", cols[-seq_len(at)]), with = FALSE]
  flagged <- windows[steady %in% FALSE]
  c("# Statistics per cell", "", stats_method(settings), "",
    if (nrow(flagged)) {
      sprintf("%d repetition(s) never reached steady state (column not_steady; steady_state.csv).",
              nrow(flagged))
    } else {
      "Every repetition that could be judged reached steady state."
    }, "", chosen,
    md_lines(shown, memo_body_lines(shown, memo, "cells")), "")
}

# The statistics of a study from its long tables: list(windows (per
# repetition: steady_state.csv), cells (cell_stats.csv), comparisons
# (comparisons.csv)); cells as written, without the bootstrap attributes.
study_statistics <- function(summary, samples, axes, baseline = list(),
                             settings = STATS_DEFAULTS) {
  statistics_of_series(summary, samples_by_cell(samples, axes), axes, baseline, settings)
}

# study_statistics() of samples keyed by cell id: `source` is a cell_chunks() source (or samples_by_cell()'s
# list(cells, samples), taken as one). The cells are worked through in chunks of whole cells, about
# getOption("dbsweep.chunk_rows") samples each (STATISTICS_CHUNK_ROWS), getOption("dbsweep.cores") chunks
# at a time (forked R processes): everything up to the comparisons is per repetition or per cell, so
# memory holds a chunk's samples per process (100 million samples fit in 8 GB), and the tables are the same
# as in one piece (each cell's bootstrap is seeded from its identity). Only the bootstrap draws and
# per-repetition medians of every cell are kept for the comparisons.
#
# `store` (statistics_store() of rule statistics' cache, or NULL): the cells whose inputs are those of the
# last run are read back from it, only the others computed; the tables are the same bytes as without it.
statistics_of_series <- function(summary, source, axes, baseline = list(), settings = STATS_DEFAULTS,
                                 store = NULL) {
  if (is.null(source$read)) source <- cell_chunks(source)
  start <- proc.time()[["elapsed"]]
  kept <- per_second_summary(summary, source$cells, axes)
  summary <- kept$summary
  check_cells_without_samples(summary, source$cells, axes)
  todo <- if (is.null(store)) source$chunks else chunks_of_cells(source, store$fresh)
  chunks <- map_chunks(todo, chunk_statistics, summary = summary, source = source, own = kept$own,
                       axes = axes, settings = settings)
  if (!is.null(store)) chunks <- c(list(store$cached), chunks)
  windows <- rbindlist(lapply(chunks, `[[`, "windows"), use.names = TRUE)
  if (is.unsorted(windows$.cell)) setorder(windows, .cell)  # stable: each cell's rows keep their order
  spent <- Reduce(`+`, lapply(chunks, `[[`, "seconds"))
  log_line(paste("steady state: %d repetitions, %d flagged, %d with stalls (%.1f s; per chunk, summed over %d",
                 "chunk(s) in %d process(es): read %.1f, check %.1f, steady %.1f, windows %.1f, per cell %.1f)"),
           nrow(windows), sum(windows$steady %in% FALSE), sum(windows$stall_seconds > 0),
           proc.time()[["elapsed"]] - start, length(todo), chunk_cores(length(todo)), spent[["read"]],
           spent[["check"]], spent[["steady"]], spent[["window"]], spent[["cells"]])
  parts <- list()
  for (chunk in chunks) {
    for (name in names(chunk$parts)) parts[[name]] <- c(parts[[name]], list(chunk$parts[[name]]))
  }
  rm(chunks)
  cells <- joined_cell_stats(parts, axes)
  log_line("cell statistics: %d rows (%.1f s)", nrow(cells), proc.time()[["elapsed"]] - start)
  comparisons <- comparisons_table(cells, axes, baseline, settings, store)
  log_line("comparisons: %d rows (%.1f s)", nrow(comparisons), proc.time()[["elapsed"]] - start)
  if (!is.null(store)) {
    save_statistics_store(store, windows, cells)
    log_line("cache: %d cells read back, %d computed, written to %s (%.1f s)", nrow(source$cells) -
               length(store$fresh), length(store$fresh), store$path, proc.time()[["elapsed"]] - start)
  }
  windows[, .cell := NULL]
  list(windows = windows, cells = cells, comparisons = comparisons)
}

# The chunks (cell_chunk_ids()) of the cells `ids` of `source` alone: those the cache does not hold.
chunks_of_cells <- function(source, ids) {
  if (length(ids) == nrow(source$cells)) return(source$chunks)
  lapply(cell_chunk_ids(source$per_cell[ids]), function(at) ids[at])
}

# How many processes work through n chunks: getOption("dbsweep.cores") (rule statistics' threads), at most n.
chunk_cores <- function(n) max(1L, min(n, as.integer(getOption("dbsweep.cores", 1L))))

# f(ids, ...) of every chunk, in order: in chunk_cores() forked processes (parallel::mclapply) when that is
# more than one. A chunk that fails stops with its own error, the first in chunk order; a chunk whose
# process died (the OOM killer, a signal) comes back from mclapply as NULL with only a warning, and stops
# here too, naming it: dropped, its rows would shift every later chunk's onto the wrong cells.
map_chunks <- function(chunks, f, ...) {
  cores <- chunk_cores(length(chunks))
  if (cores == 1L) return(lapply(chunks, f, ...))
  out <- suppressWarnings(parallel::mclapply(chunks, f, ..., mc.cores = cores))  # its warning: the errors below
  for (i in seq_along(out)) {
    r <- out[[i]]
    if (inherits(r, "try-error")) stop(attr(r, "condition"))
    if (is.null(r)) {
      stop(sprintf("chunk %d of %d: its process (one of %d) ended without a result (killed: out of memory?)",
                   i, length(chunks), cores), call. = FALSE)
    }
  }
  out
}

# The windows (with the axes), per metric all_cell_stats()' parts, and the seconds spent per phase, of the
# cells `ids` of `source`.
chunk_statistics <- function(ids, summary, source, own, axes, settings) {
  seconds <- c(read = 0, check = 0, steady = 0, window = 0, cells = 0)
  t0 <- proc.time()[["elapsed"]]
  lap <- function(name) {
    now <- proc.time()[["elapsed"]]
    seconds[[name]] <<- now - t0
    t0 <<- now
  }
  samples <- source$read(ids)
  if (nrow(own)) samples <- samples[!own, on = c(".cell", "rep")]
  cells <- source$cells[.cell %in% ids]
  lap("read")
  summary_rows <- sort(summary[cells, on = axes, which = TRUE, nomatch = NULL])  # in the summary's order
  check_series_counts(summary[summary_rows], list(cells = cells, samples = samples), axes)
  compact <- series_of_cells(list(cells = cells, samples = samples), summary, axes)
  rm(samples)
  lap("check")
  windows <- steady_windows(compact$series, c(".cell", "rep"), "throughput", settings)
  lap("steady")
  win <- window_samples(compact$series, windows, c(".cell", "rep"), "throughput")
  compact$series <- NULL  # only the windows' seconds from here on
  lap("window")
  stats <- all_cell_stats(NULL, windows, compact$cells, axes, settings, win)
  lap("cells")
  list(windows = with_cell_axes(windows, compact$cells, axes)[, .cell := windows$.cell],
       parts = attr(stats, "parts"), seconds = seconds)
}

# all_cell_stats()' table from its parts (per metric, one per chunk, or read from the cache): each metric's
# rows, draws and per-repetition medians joined in the order of their cells' ids, the noise pooled over all
# of them; throughput metrics first, then each metric in the order of its first cell. Draws: NULL when a part
# has none (read from the cache: store_bounds() draws them again where needed).
joined_cell_stats <- function(parts, axes) {
  joined <- lapply(parts, function(chunks) {
    ids <- unlist(lapply(chunks, attr, "cells"), use.names = FALSE)
    order_ids <- if (is.unsorted(ids)) order(ids) else NULL
    in_order <- function(x) {
      if (is.null(order_ids)) x else if (is.matrix(x)) x[, order_ids, drop = FALSE] else x[order_ids]
    }
    out <- rbindlist(chunks, use.names = TRUE)
    if (!is.null(order_ids)) out <- out[order_ids]
    draws <- lapply(chunks, attr, "draws")
    # attr<-, not setattr(): data.table's copies a value bound to a name whole (basis, every cell's values
    # its draws come from: 80 MB at 10,000 cells, 0.16 s), and out is this function's alone (changed in place)
    attr(out, "draws") <- if (!any(vapply(draws, is.null, TRUE))) in_order(do.call(cbind, draws))
    attr(out, "rep_values") <- in_order(do.call(c, lapply(chunks, attr, "rep_values")))
    attr(out, "noise") <- pooled_noise(attr(out, "rep_values"))
    attr(out, "basis") <- in_order(do.call(c, lapply(chunks, attr, "basis")))
    attr(out, "cells") <- in_order(ids)
    out
  })
  first <- vapply(joined, function(part) as.numeric(min(attr(part, "cells"))), 0)
  joined <- joined[order(!names(joined) %in% THROUGHPUT_METRICS, first)]
  stats <- rbindlist(joined, use.names = TRUE)
  setcolorder(stats, c(axes, "metric"))
  setattr(stats, "parts", joined)
  stats
}

# The summary's repetitions that have per-second series: list(summary, own), own the (.cell, rep) of those
# whose workload has none (per_second 0), left out of the samples.
per_second_summary <- function(summary, cells, axes) {
  own <- summary[per_second == 0, c(axes, "rep"), with = FALSE]
  if (!nrow(own)) return(list(summary = summary, own = data.table(.cell = integer(), rep = integer())))
  list(summary = summary[per_second != 0], own = cells[own, on = axes, nomatch = NULL, .(.cell, rep)])
}

# check_sample_counts() of the summary's repetitions whose cell has no sample at all (a chunk's check sees
# only the cells it holds): each is short of samples, unless it has no duration.
check_cells_without_samples <- function(summary, cells, axes) {
  lonely <- summary[!cells, on = axes]
  if (!nrow(lonely)) return(invisible(NULL))
  none <- lonely[0L, c(axes, "rep"), with = FALSE][, second := integer()]
  check_sample_counts(lonely, none, axes)
  invisible(NULL)
}

# check_sample_counts() on samples keyed by cell id: the same checks on integer keys (a tenth of the time
# on 10 million samples); when one fails, check_sample_counts() on the axes stops with its message.
check_series_counts <- function(summary, by_cell, axes) {
  ids <- by_cell$cells[summary, on = axes, .(.cell, rep, duration_s, seconds)]
  ok <- tryCatch({
    check_sample_counts(ids, by_cell$samples, ".cell", duplicates = !increasing_repetitions(by_cell$samples))
    TRUE
  }, error = function(e) FALSE)
  if (ok) return(invisible(NULL))
  samples <- by_cell$cells[by_cell$samples, on = ".cell"]
  check_sample_counts(summary, samples, axes)
  stop("the samples' check failed on cell ids but not on the axes")  # not reached: the line above stops
}

# TRUE when each repetition (.cell, rep) of `samples` is one run of rows whose seconds strictly increase: then
# no second appears twice, and the check of every (cell, repetition, second), a grouping of all samples (1.3
# of 2 s of the check at 10 million samples), is not needed. The aggregate step writes repetitions so.
increasing_repetitions <- function(samples) {
  n <- nrow(samples)
  if (n < 2L) return(TRUE)
  same <- samples$.cell[-1L] == samples$.cell[-n] & samples$rep[-1L] == samples$rep[-n]
  runs <- n - sum(same)
  isTRUE(all(samples$second[-1L][same] > samples$second[-n][same])) &&
    isTRUE(runs == length(unique(samples$.cell * 4294967296 + samples$rep)))  # exact below 2^20 cells
}

# After a round of repetitions (the study's repeat_until), per throughput metric: the run-to-run noise
# pooled over the study and the smallest difference a comparison of two cells with `reps` repetitions
# each tells from noise, exp(ratio_half_width()) - 1: the half-width of the statistics rule's CIs. One
# row per metric: metric, cells, reps, noise_pct, df, detectable_pct (NA without a cell of 2
# repetitions or more).
round_noise <- function(summary, samples, axes, reps, settings = STATS_DEFAULTS) {
  kept <- per_second_cells(summary, samples, axes)
  out <- data.table(metric = character(), cells = integer(), reps = integer(), noise_pct = numeric(),
                    df = integer(), detectable_pct = numeric())
  if (!nrow(kept$samples)) return(out)
  compact <- cell_series(kept$samples, kept$summary, axes)
  windows <- steady_windows(compact$series, c(".cell", "rep"), "throughput", settings)
  parts <- attr(all_cell_stats(compact$series, windows, compact$cells, axes, settings), "parts")
  rows <- lapply(intersect(names(parts), THROUGHPUT_METRICS), function(m) {
    noise <- attr(parts[[m]], "noise")
    half <- if (noise$df > 0) ratio_half_width(noise, reps, reps, settings$level) else NA_real_
    data.table(metric = m, cells = nrow(parts[[m]]), reps = as.integer(reps), noise_pct = 100 * noise$s,
               df = noise$df, detectable_pct = 100 * (exp(half) - 1))
  })
  rbindlist(c(list(out), rows))
}

# Samples of at most this many rows (whole cells) are worked through at a time (option dbsweep.chunk_rows):
# 2 million samples keep rule statistics' peak near 0.6 GB whatever the study's size.
STATISTICS_CHUNK_ROWS <- 2097152L

statistics_chunk_rows <- function() as.integer(getOption("dbsweep.chunk_rows", STATISTICS_CHUNK_ROWS))

# The cells' ids (1, 2, ... in order) split into consecutive runs of at most about `chunk_rows` samples, as
# many runs as a multiple of chunk_cores() (so that the processes get even shares): the cells whose first
# sample falls in the same stretch of the cells' running total go together.
cell_chunk_ids <- function(per_cell, chunk_rows = statistics_chunk_rows()) {
  if (!length(per_cell)) return(list())
  total <- sum(as.numeric(per_cell))
  cores <- max(1L, as.integer(getOption("dbsweep.cores", 1L)))
  size <- ceiling(total / (cores * ceiling(total / (cores * chunk_rows))))
  unname(split(seq_along(per_cell), (cumsum(as.numeric(per_cell)) - per_cell) %/% size))
}

# samples_by_cell()'s list(cells, samples) as a source of chunks: cells, rows (samples in all), per_cell
# (samples per cell id), chunks (the cells' ids per chunk), read(ids): the samples of those cells; and
# fingerprints (NULL: the cells' samples are not fingerprinted, so rule statistics' cache is not used).
cell_chunks <- function(by_cell, chunk_rows = statistics_chunk_rows()) {
  samples <- by_cell$samples
  per_cell <- tabulate(samples$.cell, nrow(by_cell$cells))
  chunks <- cell_chunk_ids(per_cell, chunk_rows)
  read <- function(ids) {
    if (length(ids) == nrow(by_cell$cells)) return(samples)
    if (max(ids) - min(ids) + 1L == length(ids)) return(samples[.cell >= min(ids) & .cell <= max(ids)])
    samples[.cell %in% ids]
  }
  list(cells = by_cell$cells, rows = nrow(samples), per_cell = per_cell, chunks = chunks, read = read,
       fingerprints = NULL, columns = names(samples))
}

# The folder rule statistics_series writes (workflow/dbsweep/statistics_series.py: series.json, cells.csv,
# one little-endian binary file per column, fingerprints.txt) as a source of chunks (cell_chunks()): only
# the cell ids are read whole (4 bytes a sample); read(ids) reads the other columns' rows of those cells,
# each stretch of the file that holds them at once; a column series.json lists as empty (no value in the
# whole table, no file) is NA.
series_source <- function(dir, axes, chunk_rows = statistics_chunk_rows()) {
  manifest <- jsonlite::fromJSON(file.path(dir, "series.json"))
  n <- as.integer(manifest$rows)
  cells <- read_table(file.path(dir, "cells.csv"), axes, ".cell")
  cells[, .cell := as.integer(.cell)]
  setcolorder(cells, c(".cell", axes))
  kinds <- unlist(manifest$columns)
  empty <- names(kinds) %in% unlist(manifest$empty)
  paths <- file.path(dir, paste0(names(kinds), ".", kinds))
  for (i in which(!empty)) {
    if (file.size(paths[i]) != n * if (kinds[[i]] == "i32") 4 else 8) stop(paths[i], ": not ", n, " values")
  }
  runs <- series_runs(dir, paths[names(kinds) == ".cell"], n)
  run_end <- cumsum(as.numeric(runs$lengths))
  run_start <- run_end - runs$lengths  # rows before the run
  per_cell <- as.vector(tapply(runs$lengths, factor(runs$values, seq_len(nrow(cells))), sum, default = 0L))
  read <- function(ids) {
    take <- which(runs$values %in% ids)
    # adjacent runs make one stretch of the file
    stretch <- cumsum(c(TRUE, run_start[take][-1L] != run_end[take][-length(take)]))
    from <- run_start[take][!duplicated(stretch)]
    len <- as.vector(tapply(runs$lengths[take], stretch, sum))
    columns <- lapply(seq_along(paths), function(i) {
      if (empty[i]) rep(NA_real_, sum(len)) else read_stretches(paths[i], kinds[[i]], from, len)
    })
    setDT(setNames(columns, names(kinds)))
  }
  list(cells = cells, rows = n, per_cell = per_cell, chunks = cell_chunk_ids(per_cell, chunk_rows), read = read,
       fingerprints = series_fingerprints(file.path(dir, "fingerprints.txt"), nrow(cells)),
       columns = names(kinds))
}

# The cells' fingerprints (statistics_series.py: a hash of each cell's rows, one line per cell in id order),
# or NULL when the folder has none (written before they were).
series_fingerprints <- function(path, cells) {
  if (!file.exists(path)) return(NULL)
  out <- readLines(path)
  if (length(out) != cells) stop(path, ": ", length(out), " fingerprints for ", cells, " cells")
  out
}

# The runs of cell ids of the series folder `dir` (n rows): list(values, lengths) from cell_runs.i32 (pairs of
# cell id and rows, statistics_series.py), or, in a folder without it, from the ids themselves (cell_runs()).
series_runs <- function(dir, ids_path, n) {
  path <- file.path(dir, "cell_runs.i32")
  if (!file.exists(path)) return(cell_runs(ids_path, n))
  pairs <- readBin(path, "integer", file.size(path) / 4, size = 4L, endian = "little")
  runs <- list(values = pairs[c(TRUE, FALSE)], lengths = pairs[c(FALSE, TRUE)])
  if (sum(as.numeric(runs$lengths)) != n) stop(path, ": runs of ", sum(as.numeric(runs$lengths)), " rows, not ", n)
  runs
}

# rle() of the n cell ids of the binary column `path`, read `piece` values at a time (100 million ids
# whole, with rle()'s comparisons, would take 1.2 GB).
cell_runs <- function(path, n, piece = 16777216L) {
  con <- file(path, "rb")
  on.exit(close(con))
  values <- list()
  lengths <- list()
  while (n > 0) {
    r <- rle(readBin(con, "integer", min(piece, n), size = 4L, endian = "little"))
    values[[length(values) + 1L]] <- r$values
    lengths[[length(lengths) + 1L]] <- r$lengths
    n <- n - min(piece, n)
  }
  values <- unlist(values, use.names = FALSE)
  lengths <- unlist(lengths, use.names = FALSE)
  joined <- rle(values)  # a run cut where one piece ends and the next begins is joined again
  list(values = joined$values,
       lengths = as.integer(rowsum(lengths, rep.int(seq_along(joined$lengths), joined$lengths), reorder = FALSE)))
}

# The values at rows from[i] + 1 .. from[i] + len[i] of one binary column (kind "i32" or "f64"; NaN read as
# NA), in that order.
read_stretches <- function(path, kind, from, len) {
  con <- file(path, "rb")
  on.exit(close(con))
  size <- if (kind == "i32") 4L else 8L
  what <- if (kind == "i32") "integer" else "double"
  values <- lapply(seq_along(from), function(i) {
    seek(con, from[i] * size)
    readBin(con, what, len[i], size = size, endian = "little")
  })
  values <- if (length(values) == 1L) values[[1L]] else unlist(values, use.names = FALSE)
  if (kind == "f64") values[is.nan(values)] <- NA_real_
  values
}

# Rule statistics' per-second samples keyed by cell id, as a source of chunks (cell_chunks()): the binary
# columns of rule statistics_series (input series), or samples.csv.gz (input samples: the tests'
# hand-built studies). Logs their size.
read_rule_series <- function(input, axes, repetitions) {
  source <- if (!is.null(input[["series"]])) {
    series_source(input[["series"]], axes)
  } else {
    cell_chunks(samples_by_cell(read_statistics_samples(input[["samples"]], axes), axes))
  }
  log_line("%d repetitions, %d per-second samples, axes: %s", repetitions, source$rows,
           paste(axes, collapse = ", "))
  source
}

read_statistics_samples <- function(path, axes) {
  read_table(path, axes, required = c("rep", "second", "iops", "lat_ms", "lat_pct_ms"), select = "tps")
}

# Checkpoint round_noise: round_noise() of the repetitions so far (the round's tables, input tables).
rule_round_noise <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)
  axes <- axes_param(params)
  summary <- read_summary(file.path(input[["tables"]], "summary.csv.gz"), axes)
  samples <- read_statistics_samples(file.path(input[["tables"]], "samples.csv.gz"), axes)
  out <- round_noise(summary, samples, axes, as.integer(params[["round"]]), stats_settings(params[["analysis"]]))
  log_line("round %s: %s", params[["round"]],
           paste(sprintf("%s noise %.2f%%, detectable %.2f%%", out$metric, out$noise_pct, out$detectable_pct),
                 collapse = "; "))
  write_csv(out, output[[1]])
}

# R compiles each function to bytecode at its first call (workflow/scripts/analysis.R turns that on for data
# over 2 MB): 2.7 s of CPU that pays back over many samples, not when the cache leaves fewer than these to
# compute (one cell added to 10,000: the rule took 4.7 s of CPU without compiling, 7.0 s with). Until the
# rule knows, nothing is compiled (the reading and the cache's keys: 0.3 s of compiling for one cell).
STATISTICS_JIT_SAMPLES <- 1e6

rule_statistics <- function(input, output, params, log = snakemake_log()) {
  con <- open_log(log)
  on.exit(close_log(con), add = TRUE)
  jit <- compiler::enableJIT(0L)
  on.exit(compiler::enableJIT(jit), add = TRUE)

  axes <- axes_param(params)
  settings <- stats_settings(params[["analysis"]])
  summary <- read_summary(input[["summary"]], axes)
  provenance <- read_provenance(input[["provenance"]])
  caption <- if (length(provenance)) caption_text(provenance) else NULL
  source <- read_rule_series(input, axes, nrow(summary))
  store <- statistics_store(params[["cache"]], source, summary, axes, settings)
  if (is.null(store) || sum(source$per_cell[store$fresh]) >= STATISTICS_JIT_SAMPLES) compiler::enableJIT(jit)
  s <- statistics_of_series(summary, source, axes, params[["baseline"]], settings, store)
  s <- with_deviations(s, summary, axes, isTRUE(params[["analysis"]][["include_deviated"]]))

  write_csv(s$windows, output[["steady_state"]])
  write_csv(s$cells, output[["cell_stats_csv"]])
  memo <- statistics_md_memo(store)
  write_md_lines(cell_stats_md_lines(s$cells, s$windows, settings, axes, memo), output[["cell_stats_md"]],
                 caption)
  write_csv(s$comparisons, output[["comparisons_csv"]])
  write_md_lines(comparisons_md_lines(s$cells, s$comparisons, axes, settings, memo),
                 output[["comparisons_md"]], caption)
  save_statistics_md_memo(memo)
  invisible(s)
}
