# Deviated repetitions (deviated.R): a comparison that involves a cell with a
# deviated setting, as its cell or as its baseline, is left out, or kept and
# marked with analysis.include_deviated.

source(file.path("..", "..", "workflow", "R", "library.R"), chdir = TRUE)

comparisons_of <- function() {
  data.table(axis = c("engine", "engine", "threads"), baseline = c("innodb", "innodb", "1"),
             axis_value = c("myrocks", "postgresql", "4"), metric = "tps",
             engine = c("myrocks", "postgresql", "innodb"), threads = c(4L, 4L, 4L), ratio = c(0.5, 0.8, 3))
}

test_that("a comparison is marked when its cell or its baseline cell deviated, and no other", {
  reps <- data.table(engine = "postgresql", threads = 4L, rep = 2L)
  expect_equal(involves_deviated(comparisons_of(), reps, c("engine", "threads")), c(FALSE, TRUE, FALSE))
  base <- data.table(engine = "innodb", threads = 1L, rep = 1L)  # the threads comparison's baseline cell
  expect_equal(involves_deviated(comparisons_of(), base, c("engine", "threads")), c(FALSE, FALSE, TRUE))
  expect_equal(involves_deviated(comparisons_of()[0], base, c("engine", "threads")), logical())
})

test_that("deviated comparisons are left out by default and kept marked with include", {
  summary <- data.table(engine = c("innodb", "postgresql"), threads = 4L, rep = 1:2, deviations = c(0L, 3L))
  s <- list(cells = data.table(engine = c("innodb", "postgresql"), threads = 4L, metric = "tps"),
            comparisons = comparisons_of())
  out <- with_deviations(s, summary, c("engine", "threads"))
  expect_equal(out$comparisons$axis_value, c("myrocks", "4"))
  expect_equal(out$cells$deviated_reps, c(0L, 1L))
  kept <- with_deviations(s, summary, c("engine", "threads"), include = TRUE)
  expect_equal(kept$comparisons$includes_deviated, c(FALSE, TRUE, FALSE))
  old <- with_deviations(s, summary[, !"deviations"], c("engine", "threads"))
  expect_identical(old, s)  # a summary from before the checks: nothing changes
})
