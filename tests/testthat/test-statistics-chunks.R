# Rule statistics works through its cells in chunks (option dbsweep.chunk_rows), several processes at a time
# (option dbsweep.cores): the tables are those of one piece.

# Chunks of about 200 samples: 4 to 8 chunks of a few whole cells each in the first test, the two processes
# taking several each (chunks of 50 samples, one cell each, cost the test twice the CPU: each chunk's own
# work, in forked processes).
in_chunks <- function(code, rows = 200L, cores = 2L) {
  withr::with_options(list(dbsweep.chunk_rows = rows, dbsweep.cores = cores), code)
}

test_that("chunks of cells in two processes give the tables of one piece, rows in any order", {
  for (reps in 1:3) {  # block bootstrap (one repetition), t interval with the noise pooled over the study
    sweep <- make_sweep(reps = reps, duration = 40L)
    shuffled <- sweep$samples[sample(.N)]  # a cell's rows spread over the table
    whole <- study_statistics(copy(sweep$summary), copy(shuffled), sweep$axes)
    chunked <- in_chunks(study_statistics(copy(sweep$summary), copy(shuffled), sweep$axes))
    for (table in c("windows", "cells", "comparisons")) {
      expect_identical(chunked[[table]], whole[[table]], label = paste(table, "reps", reps))
    }
    expect_gt(nrow(whole$comparisons), 0L)
  }
})

test_that("a chunk's failed check stops with its own message", {
  sweep <- make_sweep(reps = 1L, duration = 40L)
  last <- sweep$summary[.N]
  short <- sweep$samples[!(filesystem == last$filesystem & threads == last$threads & mode == last$mode &
                            second > 10L)]
  expect_error(in_chunks(study_statistics(sweep$summary, short, sweep$axes)),
               "rep 1: 10 per-second samples .* need at least 32")
})

test_that("a chunk whose process is killed stops the statistics rather than drop its rows", {
  # mclapply gives a killed process's chunk back as NULL with only a warning: unlisted, the ratios' bounds
  # of every later chunk would land on the wrong comparisons
  killed <- function(i) {
    if (i == 2L) tools::pskill(Sys.getpid(), tools::SIGKILL)
    i
  }
  expect_error(in_chunks(map_chunks(list(1L, 2L, 3L), killed)),
               "chunk 2 of 3: its process \\(one of 2\\) ended without a result")
  expect_identical(in_chunks(map_chunks(list(1L, 3L), killed)), list(1L, 3L))
})

test_that("the runs of cell ids read in pieces are those of the whole column", {
  ids <- c(rep(1L, 5L), rep(2L, 3L), rep(1L, 4L), 3L, 3L, 3L)
  path <- tempfile()
  writeBin(ids, path, size = 4L, endian = "little")
  whole <- rle(ids)
  for (piece in c(1L, 2L, 3L, 5L, 100L)) {
    expect_identical(cell_runs(path, length(ids), piece), list(values = whole$values, lengths = whole$lengths))
  }
})
