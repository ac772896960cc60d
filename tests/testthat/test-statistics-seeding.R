# A cell's bootstrap CI depends on that cell alone: its resampling is seeded from its identity.

# One repetition per cell (block bootstrap) and 2 repetitions per cell, with and without one more cell.
with_and_without <- function(reps) {
  sweep <- make_sweep(list(filesystem = c("ext4", "xfs"), threads = c(1L, 4L)), reps = reps, duration = 120L)
  settings <- stats_settings(list(steady_state = FALSE))
  fewer <- study_statistics(sweep$summary[!(filesystem == "ext4" & threads == 1L)],
                            sweep$samples[!(filesystem == "ext4" & threads == 1L)], sweep$axes, list(), settings)
  more <- study_statistics(sweep$summary, sweep$samples, sweep$axes, list(), settings)
  list(fewer = fewer, more = more)
}

test_that("adding a cell leaves every other cell's CI exactly as it was", {
  for (reps in 1:2) {
    s <- with_and_without(reps)
    cols <- c("filesystem", "threads", "metric", "median", "ci_low", "ci_high")
    columns <- function(dt) lapply(stats::setNames(cols, cols), function(col) dt[order(filesystem, threads, metric)][[col]])
    expect_identical(columns(s$more$cells[!(filesystem == "ext4" & threads == 1L)]), columns(s$fewer$cells),
                     label = paste("reps", reps))
  }
  # one repetition everywhere: a comparison's CI comes from its two cells' draws, so it stays too
  s <- with_and_without(1L)
  cols <- c("axis", "filesystem", "threads", "metric", "ratio_low", "ratio_high")
  shared <- s$more$comparisons[!(filesystem == "ext4" & threads == 1L), ..cols]
  expect_gt(nrow(s$fewer$comparisons), 0L)
  expect_identical(shared[s$fewer$comparisons[, ..cols], on = cols, nomatch = NULL, .N],
                   nrow(s$fewer$comparisons))
})

test_that("a cell's draws depend on its identity and the study's seed, not on its position", {
  values <- list(c(5, 1, 9, 3, 7, 2), c(10, 20, 30, 40))
  ids <- c("engine=innodb\ttps", "engine=myrocks\ttps")
  both <- bootstrap_medians(values, 200L, ids = ids)
  expect_identical(bootstrap_medians(rev(values), 200L, ids = rev(ids)), both[, 2:1])
  expect_identical(bootstrap_medians(values[2], 200L, ids = ids[2]), both[, 2, drop = FALSE])
  expect_false(identical(bootstrap_medians(values[2], 200L, ids = ids[1]), both[, 2, drop = FALSE]))
  expect_false(identical(bootstrap_medians(values, 200L, seed = 1L, ids = ids), both))
  expect_length(unique(identity_seeds(sprintf("cell %d", 1:5000))), 5000L)
})

test_that("the middle ranks of a resample have their exact distribution (every resample of k <= 6 counted)", {
  for (k in 1:6) {
    resamples <- as.matrix(do.call(CJ, rep(list(seq_len(k)), k)))
    sorted <- matrix(resamples[order(row(resamples), resamples)], ncol = k, byrow = TRUE)
    counted <- data.table(lo = sorted[, (k + 1L) %/% 2L], hi = sorted[, k %/% 2L + 1L])[
      , .(p = .N / nrow(resamples)), keyby = .(lo, hi)]
    exact <- as.data.table(median_rank_pairs(k))[p > 0][order(lo, hi)]
    expect_equal(exact$lo, counted$lo, label = paste("k", k))
    expect_equal(exact$hi, counted$hi, label = paste("k", k))
    expect_equal(exact$p, counted$p, tolerance = 1e-12, label = paste("k", k))
  }
  # 100 ten-second blocks (a 1,000 s repetition): pairs 60 ranks apart or more are left out, mass 1 kept
  expect_equal(sum(median_rank_pairs(100L)$p), 1, tolerance = 1e-12)
})

test_that("the bootstrap CI of a median covers it at the stated level on normal data", {
  # 400 samples of 11 values from N(0, 1): the percentile interval of the median contains 0 in about
  # 95% of them (the percentile bootstrap of a median is a little liberal at small n)
  set.seed(2)
  values <- lapply(1:400, function(i) stats::rnorm(11))
  ci <- column_quantiles(bootstrap_medians(values, 1000L), 0.95)
  expect_gt(mean(ci$low <= 0 & ci$high >= 0), 0.9)
  expect_lt(mean(ci$low <= 0 & ci$high >= 0), 0.99)
})
