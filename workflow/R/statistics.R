# dbsweep's statistics, shared by the analysis scripts (sourced after
# read.R): the steady-state window and stalls of each repetition, per-cell
# statistics with a bootstrap confidence interval of the median, and ratios
# against a baseline value of an axis with a within-noise verdict.
#
# Every function takes long per-second tables (one row per repetition and
# second) and returns data.tables; none reads or writes files. Vectorised over
# cells with data.table so that 10 million per-second samples take seconds.
#
# Method, as the tables' preambles state it (STATS_METHOD):
# - Warm-up: the first `trim_s` seconds of each repetition are dropped (the
#   study's fixed trim); then the steady state starts where MSER-5 truncates:
#   on 5-second batch medians z_1..z_m, the d minimising
#   sum((z_{d+1..m} - mean)^2) / (m - d)^2 over d <= m / 2 (the earliest d
#   within 10% of that minimum: past the warm-up the statistic is flat and
#   noise would otherwise move the start late). Batch *medians*
#   (not means) keep a 1-2 s stall from moving the window. A repetition whose
#   minimum is at that limit (still settling at its midpoint) never reached
#   steady state: it is flagged, and its window is the second half. A series
#   shorter than 100 s (20 batches) is too short to judge: steady is NA and
#   the window is the whole series after the trim.
# - Stalls: seconds of the window whose throughput is below stall_share x the
#   window's median; their count and the longest run of consecutive ones.
# - Per cell: median, mean, sd, 5th and 95th percentile of the per-second
#   values of all repetitions' windows; the spread between repetitions (sd and
#   (max - min) / median of their medians); `median` is the median of the
#   per-repetition medians. 95% CI of that median: percentile bootstrap over
#   the per-repetition medians (2 repetitions or more), or over the medians of
#   10-second blocks of the window (one repetition; at least 5 blocks).
# - Comparisons: ratio = rep_gmean / rep_gmean of the cell with the axis's
#   baseline value and the same other axes (the geometric means of the
#   per-repetition medians: what the t interval is about). Its 95% CI: a t
#   interval on the log scale with the run-to-run noise pooled over all cells
#   of the study (2 repetitions per cell give a range-overlap bootstrap a
#   false alarm rate of one in three on identical cells; pooling gives the
#   test its degrees of freedom back); with one repetition everywhere, median
#   / median and the ratio of the two cells' block-bootstrap medians. Within
#   noise when the CI contains 1.

STATS_DEFAULTS <- list(
  trim_s = 0,          # seconds dropped at the start of every repetition
  steady_state = TRUE, # detect the warm-up (MSER-5) after the trim
  stall_share = 0.5,   # a second below this share of the window's median stalls
  draws = 1000L,       # bootstrap draws
  level = 0.95,        # confidence level of the intervals
  block_s = 10L,       # seconds per block when a cell has one repetition
  seed = 20261123L,    # the bootstrap's random numbers are reproducible
  # the per-cell statistics cell_stats.md shows per metric, one row per cell
  statistics = c("median", "mean", "sd", "p95", "max")
)

# What analysis.statistics may name: columns of cell_stats.csv.
CELL_STATISTICS <- c("median", "mean", "sd", "p5", "p25", "p75", "p95", "min",
                     "max", "rep_sd", "rep_spread_pct", "rep_gmean")

MSER_BATCH <- 5L
MSER_MIN_BATCHES <- 20L
MSER_TOLERANCE <- 0.1
MIN_BLOCKS <- 5L

VERDICT_NOISE <- "within noise"

# The settings a study gives (params$analysis), completed with the defaults.
stats_settings <- function(analysis = list()) {
  out <- STATS_DEFAULTS
  for (name in intersect(names(analysis), names(out))) {
    value <- analysis[[name]]
    if (!is.null(value)) out[[name]] <- value
  }
  out
}

# The method as people read it, for the tables' preambles and the report.
stats_method <- function(settings = STATS_DEFAULTS) {
  s <- settings
  paste(
    sprintf("Warm-up: the first %s s of every repetition are dropped%s.",
            format(s$trim_s),
            if (isTRUE(s$steady_state)) paste0(
              ", then the steady state starts where MSER-5 (on 5-second batch medians, ",
              "truncation searched up to half the series, the earliest within 10% of the ",
              "minimum) truncates; a repetition whose minimum is at that limit never ",
              "reached steady state, is flagged, and ",
              "keeps its second half; a repetition shorter than 100 s is not judged ",
              "(steady NA, whole series)") else ""),
    sprintf(paste("Stalls: seconds of the window below %s%% of the repetition's median",
                  "throughput (count and longest run)."), format(100 * s$stall_share)),
    paste("Per cell: mean, sd, p5, p25, p75, p95, min and max of the per-second values of all windows;",
          "median: median of the per-repetition medians; rep_sd and rep_spread_pct:",
          "sd and (max - min) / median of the per-repetition medians; rep_gmean: their geometric mean."),
    sprintf(paste("%d%% CI of the median: percentile bootstrap (%d draws) over the",
                  "per-repetition medians, or over the medians of %d-second blocks",
                  "(at least %d) when a cell has one repetition (column ci_method)."),
            as.integer(round(100 * s$level)), as.integer(s$draws),
            as.integer(s$block_s), MIN_BLOCKS),
    sprintf(paste("Ratios: rep_gmean / the baseline cell's rep_gmean (the geometric means of",
                  "the per-repetition medians, the quantity the t interval is about). Its %d%% CI",
                  "is a t interval on the log scale, ratio x exp(+-t x s x sqrt(1/n + 1/n_baseline)),",
                  "where s is the run-to-run noise (sd of the log per-repetition medians around",
                  "their cell's mean) pooled over every cell of the study with 2",
                  "repetitions or more, and n the cells' repetitions; when every cell has",
                  "one repetition, the ratio is median / the baseline's median and its CI comes",
                  "from the two cells' block bootstrap medians (within-run noise only). A",
                  "difference is within noise when the CI contains 1 (column test)."),
            as.integer(round(100 * s$level))))
}

# ---------------------------------------------------------------------------
# Per repetition

# The throughput and latency columns of per-second samples: tps where the tool
# gives it (sysbench OLTP), else iops; lat_ms (fio's per-second mean) where
# given, else lat_pct_ms (sysbench's per-interval 95th percentile).
THROUGHPUT_METRICS <- c("tps", "iops")
LATENCY_METRICS <- c(lat_ms = "lat_ms", lat_pct_ms = "lat_p95_ms")

# MSER truncation of one series of batch medians z: the number of batches to
# drop (d, at most m / 2) and whether the series reached steady state (the
# minimum lies before m / 2). Series of fewer than MSER_MIN_BATCHES batches
# are not judged (d = 0, steady NA): on stationary noise of 30 s the minimum
# falls on the limit one time in five, on 100 s one in thirty, on 300 s never
# in 400 trials.
mser_truncation <- function(z) {
  m <- length(z)
  if (m < MSER_MIN_BATCHES) return(list(d = 0L, steady = NA))
  z <- z - mean(z)
  kept <- m - seq_len(m) + 1          # batches kept when dropping 0..m-1
  s1 <- rev(cumsum(rev(z)))
  s2 <- rev(cumsum(rev(z * z)))
  stat <- pmax(s2 - s1 * s1 / kept, 0) / kept^2
  # the search stops at half the series: beyond it, few batches are left and
  # their variance says little. A minimum at that limit means the series was
  # still settling at its midpoint. Ties (a flat series) keep the earliest.
  # Past the warm-up the statistic is nearly flat, and noise decides where its
  # minimum falls: the window starts at the earliest truncation within
  # MSER_TOLERANCE of the minimum (on 240 s with a 50 s ramp, the 95th
  # percentile of the start falls from 81 s to 61 s).
  half <- m %/% 2L
  searched <- stat[seq_len(half + 1L)]
  best <- which.min(searched) - 1L
  d <- which(searched <= min(searched) * (1 + MSER_TOLERANCE))[1L] - 1L
  list(d = if (best < half) d else half, steady = best < half)
}

# Per repetition of `samples` (keys = axes + rep; columns second and `value`,
# sorted or not): the window the statistics use and its stalls. Returns one
# row per repetition: keys, seconds (samples with a value), window_start,
# window_end (seconds, inclusive), window_s, steady (TRUE, FALSE, or NA when
# too short to judge or detection is off), median (of the window),
# stall_threshold, stall_seconds, longest_stall_s.
#
# Worked on plain vectors in the order of the keys and second (no sort when the samples are in it, as rule
# statistics_series writes them): each repetition a run of rows, its batches and window stretches of it
# (a third of the time of grouping 10 million samples by repetition and batch).
steady_windows <- function(samples, keys, value = "value",
                           settings = STATS_DEFAULTS) {
  rows <- which(!is.na(samples[[value]]) & samples$second > settings$trim_s)
  column <- function(name) if (length(rows) == nrow(samples)) samples[[name]] else samples[[name]][rows]
  key_values <- lapply(setNames(keys, keys), column)
  second <- column("second")
  x <- column(value)
  o <- do.call(order, c(unname(key_values), list(second, na.last = FALSE, method = "radix")))
  if (is.unsorted(o)) {
    key_values <- lapply(key_values, `[`, o)
    second <- second[o]
    x <- x[o]
  }
  grp <- rleidv(key_values)
  seconds <- tabulate(grp, if (length(grp)) grp[length(grp)] else 0L)
  start <- cumsum(seconds) - seconds + 1L
  cut <- mser_cuts(x, start, seconds, isTRUE(settings$steady_state))
  first <- start + cut$drop  # the window: rows first .. start + seconds - 1
  window_s <- seconds - cut$drop
  mid <- run_order_statistics(x, first, window_s, summary_ranks(window_s)[, c("mid_lo", "mid_hi"), drop = FALSE])
  median <- (mid[, "mid_lo"] + mid[, "mid_hi"]) / 2  # as data.table's median
  threshold <- settings$stall_share * median
  stalls <- stall_runs(x, first, window_s, threshold)
  out <- setDT(lapply(key_values, `[`, start))
  out[, `:=`(seconds = seconds, window_start = second[first], window_end = second[start + seconds - 1L],
             window_s = window_s, steady = cut$steady, median = median, stall_threshold = threshold,
             stall_seconds = stalls$seconds, longest_stall_s = stalls$longest)]
  setkeyv(out, keys)  # in that order already
  out[]
}

# MSER-5 (mser_truncation()) of each run of x (run i: rows start[i] .. start[i] + n[i] - 1): list(drop,
# steady), the seconds each run's window leaves out at its start and whether it reached steady state (NA
# when not judged); drop 0 and steady NA everywhere when `detect` is FALSE. The batches are whole: a last,
# partial batch is not one.
mser_cuts <- function(x, start, n, detect) {
  if (!detect) return(list(drop = integer(length(n)), steady = rep(NA, length(n))))
  batches <- n %/% MSER_BATCH
  z <- median_of_5(x, rep.int(start, batches) + MSER_BATCH * (sequence(batches) - 1L))
  before <- cumsum(batches) - batches  # each run's batches in z follow these
  cut <- vapply(seq_along(n), function(i) {
    t <- mser_truncation(z[before[i] + seq_len(batches[i])])
    c(t$d, t$steady)
  }, numeric(2L))
  list(drop = as.integer(cut[1L, ]) * MSER_BATCH, steady = as.logical(cut[2L, ]))
}

# The median of x[first + 0:4] for each of `first` (no NA): the middle of the five once sorted, by a
# sorting network over the five as vectors (what data.table's median gives; a tenth of its grouping's time).
median_of_5 <- function(x, first) {
  v <- lapply(0:4, function(j) x[first + j])
  for (pass in 1:5) {
    for (i in if (pass %% 2L) c(1L, 3L) else c(2L, 4L)) {
      a <- v[[i]]
      b <- v[[i + 1L]]
      v[[i]] <- pmin(a, b)
      v[[i + 1L]] <- pmax(a, b)
    }
  }
  as.double(v[[3L]])
}

# The stalled seconds of each window (rows first[i] .. first[i] + n[i] - 1 of x): values below its
# threshold. list(seconds, longest): their count and the longest run of consecutive ones, per window.
stall_runs <- function(x, first, n, threshold) {
  windows <- length(n)
  rows <- sequence(n, first)
  owner <- rep.int(seq_len(windows), n)
  stalled <- which(x[rows] < threshold[owner])
  longest <- integer(windows)
  if (length(stalled)) {
    at <- rows[stalled]
    g <- owner[stalled]
    new_run <- c(TRUE, at[-1L] != at[-length(at)] + 1L | g[-1L] != g[-length(g)])
    run_n <- tabulate(cumsum(new_run))
    run_g <- g[new_run]
    o <- order(run_g, run_n)
    last <- !duplicated(run_g[o], fromLast = TRUE)
    longest[run_g[o][last]] <- run_n[o][last]
  }
  list(seconds = tabulate(owner[stalled], windows), longest = longest)
}

# The per-second rows of `samples` inside their repetition's window (from
# steady_windows()), with in_stall marking the stalled seconds. Rows in the
# order of `windows`, each repetition's in the samples' order.
window_samples <- function(samples, windows, keys, value = "value") {
  w <- windows[, c(keys, "window_start", "window_end", "stall_threshold"), with = FALSE]
  rows <- window_rows(samples, w, keys, value)
  if (is.null(rows)) {  # windows not one per repetition in the samples' order of keys: a join
    dt <- samples[w, on = keys, nomatch = NULL]
    dt <- dt[second >= window_start & second <= window_end & !is.na(get(value))]
    dt[, in_stall := get(value) < stall_threshold]
    dt[, c("window_start", "window_end", "stall_threshold") := NULL]
    return(dt[])
  }
  dt <- samples[rows$at]
  dt[, in_stall := get(value) < rows$threshold]
  dt[]
}

# The rows of samples inside the windows w (one row per repetition: keys, window_start, window_end,
# stall_threshold), as list(at, threshold): their row numbers in the order of w (each repetition's in the
# samples' order) and each one's stall threshold; without a join when w's repetitions are in the order of
# the samples' keys (what steady_windows() gives). NULL when they are not, or a repetition is twice in w.
window_rows <- function(samples, w, keys, value) {
  key_values <- lapply(keys, function(k) samples[[k]])
  o <- do.call(order, c(key_values, list(na.last = FALSE, method = "radix")))
  if (!is.unsorted(o)) o <- NULL
  sorted <- if (is.null(o)) key_values else lapply(key_values, `[`, o)
  grp <- rleidv(sorted)
  n <- tabulate(grp, if (length(grp)) grp[length(grp)] else 0L)
  start <- cumsum(n) - n + 1L
  groups <- setDT(lapply(setNames(sorted, keys), `[`, start))
  at <- w[groups, on = keys, which = TRUE]
  if (length(at) != length(n) || is.unsorted(at, na.rm = TRUE, strictly = TRUE)) return(NULL)
  if (sum(!is.na(at)) != nrow(w)) return(NULL)
  row_at <- rep.int(at, n)
  second <- if (is.null(o)) samples$second else samples$second[o]
  x <- if (is.null(o)) samples[[value]] else samples[[value]][o]
  inside <- which(second >= w$window_start[row_at] & second <= w$window_end[row_at] & !is.na(x))
  list(at = if (is.null(o)) inside else o[inside], threshold = w$stall_threshold[row_at[inside]])
}

# Per-second samples keyed by an integer cell id: list(cells = .cell and the
# axes, one row per cell in order of first appearance; samples = the samples
# with .cell in place of the axes). What rule statistics_series writes and
# read_series_columns() reads back has this shape.
samples_by_cell <- function(samples, axes) {
  ids <- samples[, .cell := .GRP, by = axes]$.cell
  on.exit(samples[, .cell := NULL])
  cells <- unique(samples, by = ".cell")[, c(".cell", axes), with = FALSE]
  list(cells = cells, samples = samples[, c(".cell", setdiff(names(samples), c(axes, ".cell"))), with = FALSE])
}

# The per-second series of every repetition, compact: list(series, cells).
# cells: one row per cell with an integer id .cell, the axes, kind,
# throughput_metric (tps for sysbench OLTP, else iops) and latency_metric
# (lat_ms where the cell has fio's per-second mean, else lat_p95_ms:
# sysbench's per-interval 95th percentile). series: .cell, rep, second,
# throughput, latency. Everything after works on integer ids, so that 10
# million samples do not carry their axes' text through every step.
cell_series <- function(samples, summary, axes) {
  series_of_cells(samples_by_cell(samples, axes), summary, axes)
}

# cell_series() of samples_by_cell()'s list(cells, samples). A column that serves every cell is taken
# whole (no per-sample choice where all cells are alike).
series_of_cells <- function(by_cell, summary, axes) {
  samples <- by_cell$samples
  cells <- copy(by_cell$cells)
  kinds <- unique(summary[, c(axes, "kind"), with = FALSE], by = axes)
  cells[kinds, kind := i.kind, on = axes]
  ids <- max(cells$.cell, samples$.cell, 0L)
  database <- logical(ids)
  database[cells$.cell] <- cells$kind %in% "database"
  cells[, throughput_metric := fifelse(kind %in% "database", "tps", "iops")]
  tps <- if ("tps" %in% names(samples)) samples$tps else rep(NA_real_, nrow(samples))
  in_database <- database[samples$.cell]
  throughput <- if (all(in_database)) tps else if (!any(in_database)) samples$iops else
    fifelse(in_database, tps, samples$iops)
  series <- data.table(.cell = samples$.cell, rep = samples$rep, second = samples$second,
                       throughput = throughput, latency = samples$lat_ms)
  present <- which(tabulate(series$.cell, ids) > 0L)
  with_mean <- tabulate(series$.cell[!is.na(series$latency)], ids) > 0L
  has_mean <- data.table(.cell = present, m = with_mean[present])
  cells[has_mean, latency_metric := fifelse(i.m, "lat_ms", "lat_p95_ms"), on = ".cell"]
  pct_of <- logical(ids)
  pct_of[cells$.cell] <- cells$latency_metric %in% "lat_p95_ms"
  pct <- pct_of[series$.cell]
  if (all(pct)) {
    series[, latency := as.double(samples$lat_pct_ms)]
  } else if (any(pct)) {
    series[pct, latency := samples$lat_pct_ms[pct]]
  }
  list(series = series, cells = cells)
}

# A table keyed by .cell with the cells' axes put in front (row order kept).
with_cell_axes <- function(dt, cells, axes) {
  out <- cbind(cells[match(dt$.cell, cells$.cell), ..axes], dt)
  out[, .cell := NULL]
  out[]
}

# ---------------------------------------------------------------------------
# Bootstrap

# An integer seed per group from its identity (text: a cell's axes and metric)
# and the study's seed: a polynomial hash of the text's code points, modulo a
# prime below 2^31. A group's random numbers depend on nothing else, so a
# cell's CI does not move when other cells are added, removed or reordered.
IDENTITY_MODULUS <- 2147483629
identity_seeds <- function(ids, seed = STATS_DEFAULTS$seed) {
  codes <- lapply(enc2utf8(as.character(ids)), utf8ToInt)
  n <- lengths(codes)
  flat <- unlist(codes, use.names = FALSE)
  owner <- rep.int(seq_along(ids), n)
  h <- rep(as.numeric(seed) %% IDENTITY_MODULUS, length(ids))
  at <- split(seq_along(flat), sequence(n))  # the i-th characters of every id
  for (i in seq_along(at)) {
    who <- owner[at[[i]]]
    h[who] <- (h[who] * 131 + flat[at[[i]]]) %% IDENTITY_MODULUS
  }
  as.integer(h)
}

# The identity text of each row of `keys` (a data.table of key columns):
# "axis=value" joined by tabs, then `suffix` (the metric).
identity_text <- function(keys, suffix = "") {
  parts <- lapply(names(keys), function(k) paste0(k, "=", keys[[k]]))
  paste(do.call(paste, c(parts, sep = "\t")), suffix, sep = "\t")
}

# The exact distribution of the middle ranks of one bootstrap resample of k
# sorted values: the resample's median is (x[lo] + x[hi]) / 2 with
# probability p. Odd k: lo = hi = j, P(median <= x_j) = P(Binom(k, j/k) >=
# (k + 1) / 2). Even k (m = k / 2): lo < hi when m draws fall in 1..lo with
# one at lo and the other k - m in hi..k with one at hi, choose(k, m) ways;
# lo = hi takes the rest of P(X_(m) = lo). Pairs more than MAX_RANK_GAP ranks
# apart (no draw between them: probability about exp(-gap)) are left out.
MAX_RANK_GAP <- 60L
median_rank_pairs <- function(k) {
  if (k %% 2L == 1L) {
    m <- (k + 1L) %/% 2L
    cdf <- stats::pbinom(m - 1L, k, seq_len(k) / k, lower.tail = FALSE)
    return(list(lo = seq_len(k), hi = seq_len(k), p = diff(c(0, cdf))))
  }
  m <- k %/% 2L
  gap <- min(MAX_RANK_GAP, k - 1L)
  pairs <- CJ(lo = seq_len(k - 1L), d = seq_len(gap))[, hi := lo + d][hi <= k]
  a <- pairs$lo
  b <- pairs$hi
  pairs[, p := exp(lchoose(k, m) + m * log(a / k) + log1p(-((a - 1) / a)^m) +
                     (k - m) * log((k - b + 1) / k) + log1p(-((k - b) / (k - b + 1))^(k - m)))]
  apart <- pairs[, .(p = sum(p)), keyby = lo]
  at_lo <- stats::pbinom(m - 1L, k, (seq_len(k) - 1) / k) - stats::pbinom(m - 1L, k, seq_len(k) / k)
  same <- at_lo - c(apart$p, 0)  # apart$lo is 1..k - 1
  list(lo = c(seq_len(k), a), hi = c(seq_len(k), b), p = c(pmax(same, 0), pairs$p))
}

# Percentile bootstrap of the median of each group's values. `values`: a list
# of numeric vectors (one per group); `ids`: each group's identity (text, see
# identity_text(); default its position). Returns the draws x length(values)
# matrix of bootstrap medians.
#
# The median of a resample depends only on which middle ranks it drew, and
# their distribution only on the group's size (median_rank_pairs()): each
# group draws `draws` rank pairs from it with uniforms seeded from its own
# identity (identity_seeds()), so a group's draws are the same whatever other
# groups there are. The caller's random numbers are left as they were.
bootstrap_medians <- function(values, draws = STATS_DEFAULTS$draws,
                              seed = STATS_DEFAULTS$seed, ids = NULL) {
  has_seed <- exists(".Random.seed", envir = globalenv(), inherits = FALSE)
  if (has_seed) old <- get(".Random.seed", envir = globalenv())
  on.exit(if (has_seed) assign(".Random.seed", old, envir = globalenv())
          else rm(".Random.seed", envir = globalenv()))
  if (is.null(ids)) ids <- seq_along(values)
  seeds <- identity_seeds(ids, seed)
  sizes <- lengths(values)
  out <- matrix(NA_real_, draws, length(values))
  for (k in sort(unique(sizes[sizes > 0]))) {
    which_groups <- which(sizes == k)
    flat <- unlist(values[which_groups], use.names = FALSE)
    sorted <- flat[order(rep(seq_along(which_groups), each = k), flat)]  # k per group, each sorted
    pairs <- median_rank_pairs(k)
    u <- vapply(seeds[which_groups], function(s) {
      set.seed(s)
      stats::runif(draws)
    }, numeric(draws))
    pick <- interval_of(u, c(0, cumsum(pairs$p))[seq_along(pairs$p)])
    lo <- pairs$lo[pick] + rep.int((seq_along(which_groups) - 1L) * k, rep.int(draws, length(which_groups)))
    out[, which_groups] <- (sorted[lo] + sorted[lo + (pairs$hi - pairs$lo)[pick]]) / 2
  }
  out
}

# findInterval(u, left) for uniforms u in [0, 1) and left sorted from 0: the interval each u falls in (of
# equal ends, the last). Each u starts from the interval of its bucket's lower end (2^16 buckets) and steps
# on past every end <= u: at a million uniforms, half findInterval's time, and the same intervals.
INTERVAL_BUCKETS <- 65536
interval_of <- function(u, left) {
  last <- which(!duplicated(left, fromLast = TRUE))  # an interval of no width is never the one
  left <- left[last]
  start <- findInterval((seq_len(INTERVAL_BUCKETS) - 1) / INTERVAL_BUCKETS, left)
  at <- start[as.integer(u * INTERVAL_BUCKETS) + 1L]
  ends <- c(left[-1L], Inf)
  todo <- which(ends[at] <= u)
  while (length(todo)) {
    at[todo] <- at[todo] + 1L
    todo <- todo[ends[at[todo]] <= u[todo]]
  }
  last[at]
}

# The (1 - level) / 2 and (1 + level) / 2 quantiles of each column of m
# (type 7, as stats::quantile gives by default; NA sorted last). Each column
# is partly sorted, only at the ranks the two quantiles read (10,000 columns
# of 1,000 draws: a fifth of the time of ordering the whole matrix).
column_quantiles <- function(m, level = STATS_DEFAULTS$level) {
  n <- nrow(m)
  probs <- c((1 - level) / 2, (1 + level) / 2)
  h <- (n - 1) * probs + 1
  lo <- floor(h)
  hi <- pmin(lo + 1, n)
  at <- sort(unique(c(lo, hi)))
  has_na <- if (anyNA(m)) colSums(is.na(m)) > 0 else logical(ncol(m))
  picked <- vapply(seq_len(ncol(m)), function(j) {
    if (has_na[j]) sort(m[, j], na.last = TRUE)[at] else at_ranks(m[, j], at)
  }, numeric(length(at)))
  picked <- matrix(picked, nrow = length(at))
  q <- function(j) {
    low <- picked[match(lo[j], at), ]
    high <- picked[match(hi[j], at), ]
    low + (h[j] - lo[j]) * (high - low)
  }
  list(low = q(1), high = q(2))
}

# The values at the (sorted) ranks `at` of x (no NA) once sorted: sort.int(x, partial = at)[at] without
# sort.int's checks of its arguments, a third of its time on 1,000 values (68,000 columns at 10,000 cells).
at_ranks <- function(x, at) .Internal(psort(x, at))[at]

# column_quantiles() of the ratios draws[, rows] / draws[, base_rows] (not finite: NA), a block of columns
# at a time (the ratio draws of 48,000 comparisons would be 380 MB at once), the blocks shared by
# getOption("dbsweep.cores") forked processes (map_chunks()) when there are several: 48,000 comparisons
# of 1,000 draws each took 3 s in one process.
ratio_quantiles <- function(draws, rows, base_rows, level = STATS_DEFAULTS$level, block = 4096L) {
  if (!length(rows)) return(list(low = numeric(), high = numeric()))
  cores <- max(1L, as.integer(getOption("dbsweep.cores", 1L)))
  size <- ceiling(length(rows) / (cores * ceiling(length(rows) / (cores * block))))  # even shares
  blocks <- unname(split(seq_along(rows), (seq_along(rows) - 1L) %/% size))
  parts <- map_chunks(blocks, function(b) {
    x <- draws[, rows[b], drop = FALSE] / draws[, base_rows[b], drop = FALSE]
    if (!all(is.finite(range(x)))) x[!is.finite(x)] <- NA_real_
    column_quantiles(x, level)
  })
  list(low = unlist(lapply(parts, `[[`, "low"), use.names = FALSE),
       high = unlist(lapply(parts, `[[`, "high"), use.names = FALSE))
}

# ---------------------------------------------------------------------------
# Per cell

# The probabilities of the per-cell quantiles (columns p5, p25, p75, p95).
CELL_PROBS <- c(p5 = 0.05, p25 = 0.25, p75 = 0.75, p95 = 0.95)

# The ranks a run of n values is read at once sorted, one row per run: 1 (min), for each of CELL_PROBS the
# two ranks its type 7 quantile (stats::quantile's default) lies between, the two middle ranks (the
# median; the same rank twice when n is odd), and n (max).
summary_ranks <- function(n) {
  h <- outer(n - 1, CELL_PROBS) + 1
  lo <- floor(h)
  out <- cbind(rep(1, length(n)), lo, pmin(lo + 1, n), (n + 1) %/% 2, n %/% 2 + 1, n)
  colnames(out) <- c("min", paste0(names(CELL_PROBS), "_lo"), paste0(names(CELL_PROBS), "_hi"), "mid_lo", "mid_hi",
                     "max")
  storage.mode(out) <- "integer"
  out
}

# The values of each run of x (run i: x[start[i] .. start[i] + n[i] - 1], no NA) at its row of `ranks`
# once the run is sorted: a matrix like ranks. One partial sort per run at those ranks only: at 10 million
# values in runs of 1,000, a fifth of the time of ordering all of x by run and value.
run_order_statistics <- function(x, start, n, ranks) {
  if (!length(n)) return(ranks + 0)
  width <- max(ranks) + 1
  key <- sort(unique(as.vector((row(ranks) - 1) * width + ranks)))
  at <- split(as.integer(key %% width), as.integer(key %/% width))  # each run's ranks sorted, once each
  end <- start + n - 1L
  values <- vapply(seq_along(n), function(i) .Internal(psort(x[start[i]:end[i]], at[[i]]))[ranks[i, ]],
                   numeric(ncol(ranks)))
  matrix(values, ncol = ncol(ranks), byrow = TRUE, dimnames = dimnames(ranks))
}

# The type 7 quantile p of runs of n values from their values at the two ranks it lies between.
ranked_quantile <- function(at_lo, at_hi, n, p) {
  h <- (n - 1) * p + 1
  at_lo + (h - floor(h)) * (at_hi - at_lo)
}

# The rows of win (columns .cg, rep, second) in the order cell_values() reads them: by cell, then
# repetition in order of first appearance within the cell, then second. NULL when they are in that order
# already (rule statistics_series writes them so).
cell_rep_order <- function(win) {
  o <- order(win$.cg, win$rep, win$second, method = "radix")
  if (!is.unsorted(o)) return(NULL)
  seen <- win[, .(.cg, rep)][, .g := .GRP, by = .(.cg, rep)]$.g  # repetitions in order of first appearance
  order(win$.cg, seen, win$second, method = "radix")
}

# Per cell (the axes) of samples windowed by window_samples() (`value` without NA): n, mean, sd, min, max,
# p5, p25, p75, p95 of all per-second values; the per-repetition medians; the bootstrap basis. Returns
# list(stats = data.table, basis = list of vectors, one per row of stats, rep_values). Medians and quantiles
# are read from one partial sort per cell (run_order_statistics()), and per repetition for cells of several.
cell_values <- function(win, axes, value = "value", settings = STATS_DEFAULTS) {
  setnames(win, value, ".x")
  on.exit(setnames(win, ".x", value))
  win[, .cg := .GRP, by = axes]  # 1, 2, ... in order of first appearance
  on.exit(win[, .cg := NULL], add = TRUE)
  pooled <- win[, .(seconds = .N, mean = mean(.x), sd = sd(.x)), by = .cg]  # GForce: sd, not stats::sd
  o <- cell_rep_order(win)
  pick <- function(column) if (is.null(o)) win[[column]] else win[[column]][o]
  x <- pick(".x")
  cg <- pick(".cg")
  rep_id <- pick("rep")
  # pooled$.cg is 1, 2, ..., as the cells' runs in x; and the runs of one cell's repetition
  start <- cumsum(pooled$seconds) - pooled$seconds + 1L
  if (isTRUE(min(rep_id) == max(rep_id))) {  # one repetition everywhere: a cell's run is its repetition's
    run_start <- start
  } else {
    rows <- length(x)
    run_start <- c(1L, which(cg[-1L] != cg[-rows] | rep_id[-1L] != rep_id[-rows]) + 1L)
  }
  run_n <- diff(c(run_start, length(x) + 1L))
  run_cg <- cg[run_start]
  reps_of <- tabulate(run_cg, nrow(pooled))
  ranks <- summary_ranks(pooled$seconds)
  at <- run_order_statistics(x, start, pooled$seconds, ranks)
  n <- pooled$seconds
  pooled[, `:=`(min = at[, "min"], max = at[, "max"])]
  for (p in names(CELL_PROBS)) {
    set(pooled, j = p, value = ranked_quantile(at[, paste0(p, "_lo")], at[, paste0(p, "_hi")], n, CELL_PROBS[[p]]))
  }
  axis_rows <- if (is.null(o)) start else o[start]
  pooled <- cbind(win[axis_rows, ..axes], pooled)
  # per-repetition medians: a cell of one repetition has its own (the median of its values)
  m <- ((at[, "mid_lo"] + at[, "mid_hi"]) / 2)[run_cg]  # as data.table's median: (a + b) / 2
  several <- which(reps_of[run_cg] > 1L)
  if (length(several)) {
    mid <- summary_ranks(run_n[several])[, c("mid_lo", "mid_hi"), drop = FALSE]
    rep_at <- run_order_statistics(x, run_start[several], run_n[several], mid)
    m[several] <- (rep_at[, "mid_lo"] + rep_at[, "mid_hi"]) / 2
  }
  per_rep <- data.table(.cg = run_cg, rep = rep_id[run_start], m = m)
  reps <- repetition_statistics(per_rep)
  blocks <- single_rep_blocks(x, reps_of, start, n, settings)
  cells <- reps[pooled, on = ".cg"]
  setcolorder(cells, axes)
  cells[blocks, block_values := i.block_values, on = ".cg"]
  if (!"block_values" %in% names(cells)) cells[, block_values := list(list(NULL))]
  cells[, .cg := NULL]
  cells[, ci_method := ifelse(reps > 1L,
                              sprintf("bootstrap over %d repetitions", reps),
                              block_method(seconds, lengths(block_values)))]
  basis <- ifelse(cells$reps > 1L, cells$rep_values, cells$block_values)
  rep_values <- cells$rep_values
  cells[, c("rep_values", "block_values") := NULL]
  list(stats = cells, basis = basis, rep_values = rep_values)
}

# The medians of consecutive blocks of about block_s seconds (at least MIN_BLOCKS, at most one per second)
# of each cell of one repetition: x ordered by cell (1, 2, ...) and second, the cells' runs at start
# (n values each; reps_of: their repetitions). One row per such cell: .cg, block_values (list of medians).
single_rep_blocks <- function(x, reps_of, start, n, settings) {
  one <- which(reps_of == 1L)
  if (!length(one)) return(data.table(.cg = integer(), block_values = list()))
  n <- n[one]
  k <- pmin(n, pmax(MIN_BLOCKS, n %/% settings$block_s))
  # the blocks' lengths, once per length of window (second i of n is in block ceiling(i * k / n)), then the
  # blocks numbered on across the cells: one column to group by
  cells <- data.table(n = n, k = k)
  lengths_of <- unique(cells)
  lengths_of[, blocks := lapply(seq_len(.N), function(i) tabulate(ceiling(seq_len(n[i]) * k[i] / n[i]), k[i]))]
  sizes <- unlist(lengths_of[cells, on = c("n", "k"), blocks], use.names = FALSE)
  values <- if (length(one) == length(reps_of)) x else x[sequence(n, start[one])]
  single <- data.table(.b = rep.int(seq_along(sizes), sizes), .x = values)
  m <- single[, .(m = median(.x)), by = .b]$m  # GForce: median, not stats::median
  data.table(.cg = one, block_values = unname(split(m, rep.int(seq_along(one), k))))
}

# Per cell (.cg) of its repetitions' medians m (per_rep: .cg, rep, m): reps, median, rep_sd,
# rep_spread_pct, rep_gmean and rep_values (the list of m). Cells of one repetition take the vectorised
# path (10,000 of them: a tenth of the time of one R call each), with the same values.
repetition_statistics <- function(per_rep) {
  counts <- per_rep[, .N, by = .cg]
  one <- per_rep[.cg %in% counts[N == 1L, .cg]]
  single <- one[, .(.cg, reps = 1L, median = m, rep_sd = NA_real_, rep_spread_pct = NA_real_,
                    rep_gmean = fifelse(!is.na(m) & m > 0, exp(log(m)), NA_real_), rep_values = as.list(m))]
  many <- per_rep[.cg %in% counts[N > 1L, .cg]]
  if (nrow(many)) {
    many <- many[, .(reps = .N, median = stats::median(m), rep_sd = stats::sd(m),
                     rep_spread_pct = 100 * (max(m) - min(m)) / stats::median(m),
                     rep_gmean = geometric_mean(m), rep_values = list(m)), by = .cg]
  }
  out <- rbindlist(list(single, if (nrow(many)) many), use.names = TRUE)
  out[counts[, .(.cg)], on = ".cg"]  # in per_rep's order of cells
}

# "bootstrap over 5 blocks of 1 s": the blocks a one-repetition cell's CI
# was drawn over, with the length they had (seconds / blocks, to 2 digits;
# the study's block_s only when the window holds 5 blocks of it or more).
block_method <- function(seconds, blocks) {
  sprintf("bootstrap over %d blocks of %s s", blocks,
          as.character(signif(seconds / blocks, 2)))
}

# The statistics of every cell for one metric: what cell_values() gives plus
# ci_low, ci_high; attr "draws" holds the bootstrap medians (a matrix, one
# column per row) for ratio_to_baseline(). Each cell's bootstrap is seeded
# from its identity: identity_text() of its `axes` and `value`, or, given
# `identity` (a table with the columns `axes` and id), its id there.
cell_stats <- function(win, axes, value = "value", settings = STATS_DEFAULTS, identity = NULL) {
  cv <- cell_values(win, axes, value, settings)
  keys <- cv$stats[, ..axes]
  ids <- if (is.null(identity)) identity_text(keys, value) else identity[keys, on = axes, id]
  draws <- bootstrap_medians(cv$basis, settings$draws, settings$seed, ids)
  ci <- column_quantiles(draws, settings$level)
  out <- cv$stats
  out[, `:=`(ci_low = ci$low, ci_high = ci$high)]
  setcolorder(out, c(axes, "reps", "seconds", "median", "ci_low", "ci_high",
                     "mean", "sd", "p5", "p25", "p75", "p95", "min", "max", "rep_sd",
                     "rep_spread_pct", "rep_gmean", "ci_method"))
  setattr(out, "draws", draws)
  setattr(out, "noise", pooled_noise(cv$rep_values))
  setattr(out, "rep_values", cv$rep_values)  # to pool the noise over chunks of cells
  setattr(out, "basis", cv$basis)  # what the draws are drawn from: rule statistics' cache keeps it
  out[]
}

# The run-to-run noise of one metric over a whole study: the sd of the log
# per-repetition medians around their cell's mean, pooled over every cell with
# 2 repetitions or more (cells with a median <= 0 left out). s is relative
# (0.03: 3%); df = sum(reps - 1); list(s = NA, df = 0) without such cells.
pooled_noise <- function(rep_values) {
  ok <- lengths(rep_values) > 1L &
    vapply(rep_values, function(x) length(x) > 0 && all(x > 0), TRUE)
  v <- rep_values[ok]
  df <- sum(lengths(v) - 1L)
  if (df == 0) return(list(s = NA_real_, df = 0L))
  ss <- sum(vapply(v, function(x) {
    l <- log(x)
    sum((l - mean(l))^2)
  }, 0))
  list(s = sqrt(ss / df), df = as.integer(df))
}

# ---------------------------------------------------------------------------
# Comparisons

# Half the width, on the log scale, of the CI of a ratio of two cells with n
# and n_baseline repetitions at the pooled run-to-run noise (pooled_noise()):
# t(df) x s x sqrt(1/n + 1/n_baseline). exp(it) - 1 is the smallest difference
# such a comparison tells from noise.
ratio_half_width <- function(noise, n, n_baseline, level = STATS_DEFAULTS$level) {
  stats::qt((1 + level) / 2, noise$df) * noise$s * sqrt(1 / n + 1 / n_baseline)
}

# The geometric mean of positive values (a cell's per-repetition medians); NA when any is not.
geometric_mean <- function(x) {
  if (length(x) && all(!is.na(x) & x > 0)) exp(mean(log(x))) else NA_real_
}

# "higher", "lower" or "within noise" from a ratio's CI; NA without one.
noise_verdict_ci <- function(low, high) {
  fifelse(is.na(low) | is.na(high), NA_character_,
          fifelse(low <= 1 & high >= 1, VERDICT_NOISE,
                  fifelse(low > 1, "higher", "lower")))
}

# Each cell of `cells` (from cell_stats(): columns reps, median and rep_gmean,
# attrs draws and noise) against the cell with the baseline value of `axis` and the
# same other axes. When the study has run-to-run noise (attr noise, df > 0), the
# ratio is of the cells' rep_gmean and its CI ratio x exp(+-t(df) x s x
# sqrt(1/reps + 1/reps_baseline)), a t interval on the log scale with the noise
# pooled over all cells: the t interval is about the mean of the log medians, and
# a ratio of medians tested with it calls identical cells different 7-10% of the
# time at 3-10 repetitions instead of 5% (bench/repeat_until.py); else (one
# repetition everywhere) the ratio of the two cells' independent bootstrap
# medians (blocks of one run: within-run noise only). Returns one row per
# compared cell: axis, baseline, the axes, median, median_baseline, ratio,
# ratio_low, ratio_high, verdict, test. Cells without a baseline cell are
# left out. `bounds` (rows, base_rows) gives the bootstrap CIs of the ratios
# of those rows of `cells` to those (default: ratio_quantiles() of attr draws;
# rule statistics reads the unchanged pairs' from its cache).
ratio_to_baseline <- function(cells, axes, axis, base, level = STATS_DEFAULTS$level, bounds = NULL) {
  draws <- attr(cells, "draws")
  noise <- attr(cells, "noise")
  dt <- cells[, c(axes, "median", "rep_gmean", "reps"), with = FALSE]
  dt[, .row := .I]
  others <- setdiff(axes, axis)
  base_rows <- dt[dt[[axis]] %in% base]
  pairs <- dt[!is.na(dt[[axis]]) & !dt[[axis]] %in% base]
  pairs[, `:=`(.base_row = NA_integer_, median_baseline = NA_real_, gmean_baseline = NA_real_,
               reps_baseline = NA_integer_)]
  if (length(others)) {
    pairs[base_rows, `:=`(.base_row = i..row, median_baseline = i.median, gmean_baseline = i.rep_gmean,
                          reps_baseline = i.reps), on = others]
  } else if (nrow(base_rows)) {
    pairs[, `:=`(.base_row = base_rows$.row[1], median_baseline = base_rows$median[1],
                 gmean_baseline = base_rows$rep_gmean[1], reps_baseline = base_rows$reps[1])]
  }
  pairs <- pairs[!is.na(.base_row)]
  if (!is.null(noise) && noise$df > 0) {
    pairs[, ratio := baseline_ratio(rep_gmean, gmean_baseline)]
    half <- ratio_half_width(noise, pairs$reps, pairs$reps_baseline, level)
    pairs[, `:=`(ratio_low = ratio * exp(-half), ratio_high = ratio * exp(half),
                 test = sprintf("t on log medians, run-to-run noise %s%% pooled over the study (df %d)",
                                format_number(100 * noise$s), noise$df))]
  } else {
    ci <- if (is.null(bounds)) ratio_quantiles(draws, pairs$.row, pairs$.base_row, level)
          else bounds(pairs$.row, pairs$.base_row)
    pairs[, `:=`(ratio = baseline_ratio(median, median_baseline), ratio_low = ci$low, ratio_high = ci$high,
                 test = "bootstrap of block medians (one repetition: within-run noise only)")]
  }
  pairs[, `:=`(axis = axis, baseline = dt[[axis]][.base_row])]  # base may name several (one per group)
  pairs[, verdict := noise_verdict_ci(ratio_low, ratio_high)]
  pairs[, c(".row", ".base_row", "reps", "reps_baseline", "rep_gmean", "gmean_baseline") := NULL]
  setcolorder(pairs, c("axis", "baseline", axes, "median", "median_baseline",
                       "ratio", "ratio_low", "ratio_high", "verdict", "test"))
  pairs[]
}

# Figures that are not per-second series (a query's executions, an insert-benchmark phase's figures)
# compared by the same method: `values` has one row per value with the columns `keys` (among them
# `axis`, whose values `base` are the baselines), rep and value. A cell's median is the median of its
# repetitions' medians; the ratio's CI comes from the run-to-run noise pooled over the cells with 2
# repetitions or more (ratio_to_baseline), or, with one repetition everywhere, from a bootstrap of each
# cell's own values (`unit`: what they are), when it has MIN_BLOCKS of them or more; else there is none.
values_to_baseline <- function(values, keys, axis, base, settings = STATS_DEFAULTS, unit = "values") {
  per_rep <- values[!is.na(value), .(m = stats::median(value), own = list(value)), by = c(keys, "rep")]
  cells <- per_rep[, .(median = stats::median(m), rep_gmean = geometric_mean(m), reps = .N, rep_values = list(m),
                       own = list(if (.N == 1L && length(own[[1L]]) >= MIN_BLOCKS) own[[1L]] else numeric())),
                   by = keys]
  basis <- ifelse(cells$reps > 1L, cells$rep_values, cells$own)
  setattr(cells, "draws", bootstrap_medians(basis, settings$draws, settings$seed,
                                            identity_text(cells[, ..keys], unit)))
  setattr(cells, "noise", pooled_noise(cells$rep_values))
  out <- ratio_to_baseline(cells, keys, axis, base, settings$level)
  out[startsWith(test, "bootstrap"), test := sprintf("bootstrap of the %s (one repetition: within-run noise only)",
                                                      unit)]
  out[is.na(ratio_low), test := NA_character_]
  out[]
}

# cells (relative_to_baseline's: one row per configuration and `by`, value the median of the
# repetitions' medians) with each ratio's CI, verdict and test from values_to_baseline over `values`
# (one row per value: the axes, rep, `by`, value), the noise pooled within each `by` (one figure, as
# the statistics rule pools per metric); NA at the baseline. `relative` becomes values_to_baseline's
# ratio, the one its CI is about (of the repetitions' geometric means where a t interval is used).
with_ratio_ci <- function(cells, values, vary, baseline, by, settings = STATS_DEFAULTS, unit = "values") {
  groups <- setdiff(vary, baseline_axes(vary, baseline))
  keys <- c(groups, by, "configuration")
  values <- copy(values)[, configuration := configuration_label(values, vary)]
  base <- unique(cells[baseline == TRUE, configuration])
  parts <- split(values[, c(keys, "rep", "value"), with = FALSE], by = by)
  ratios <- rbindlist(lapply(parts, values_to_baseline, keys = keys, axis = "configuration", base = base,
                             settings = settings, unit = unit))
  cells[, `:=`(ratio_low = NA_real_, ratio_high = NA_real_, verdict = NA_character_, test = NA_character_)]
  if (nrow(ratios)) {
    cells[ratios, `:=`(relative = i.ratio, ratio_low = i.ratio_low, ratio_high = i.ratio_high,
                       verdict = i.verdict, test = i.test), on = keys]
  }
  cells[]
}

# Two cells' per-repetition medians against each other by the rule of the
# tables (the noise pooled over these two cells): the verdict on a / b
# ("higher", "lower", "within noise"), the ratio and its CI.
compare_values <- function(a, b, settings = STATS_DEFAULTS) {
  cells <- data.table(cell = c("a", "b"), median = c(stats::median(a), stats::median(b)),
                      rep_gmean = c(geometric_mean(a), geometric_mean(b)), reps = c(length(a), length(b)))
  setattr(cells, "draws", bootstrap_medians(list(a, b), settings$draws, settings$seed))
  setattr(cells, "noise", pooled_noise(list(a, b)))
  r <- ratio_to_baseline(cells, "cell", "cell", "b", settings$level)
  list(ratio = r$ratio, low = r$ratio_low, high = r$ratio_high, verdict = r$verdict,
       test = r$test)
}

# The axis a comparison's pivot puts in rows: memory, then threads, then the
# varying axis with the most values; NULL when no other axis varies.
row_axis <- function(cells, axes, compared) {
  others <- setdiff(varying_axes(cells[, ..axes], axes), compared)
  if (!length(others)) return(NULL)
  preferred <- intersect(c("memory", "threads"), others)
  if (length(preferred)) return(preferred[1])
  counts <- vapply(others, function(a) uniqueN(stats::na.omit(cells[[a]])), 0L)
  others[which.max(counts)]
}
