# The plot of `./dbsweep compare A B` (workflow/dbsweep/compare.py writes the
# table): each common cell's ratio A / B with its 95% CI, on a log scale,
# coloured by verdict.

compare_plot <- function(dt, a, b) {
  dt <- copy(dt)
  dt[, cell := factor(cell, levels = rev(unique(cell)))]
  dt[verdict == "", verdict := "no CI"]
  ggplot(dt, aes(x = ratio, y = cell, colour = verdict)) +
    geom_vline(xintercept = 1, colour = "grey50") +
    geom_errorbarh(aes(xmin = low, xmax = high), height = 0.3, na.rm = TRUE) +
    geom_point(size = 2) +
    scale_x_log10() +
    scale_colour_manual(values = c(higher = "#0072B2", lower = "#D55E00",
                                   "within noise" = "grey40", "no CI" = "grey70")) +
    labs(x = "ratio A / B (log scale) with its 95% CI", y = NULL, colour = NULL,
         subtitle = sprintf("A: %s\nB: %s", a, b), caption = dt$test[1]) +
    theme_dbsweep()
}

# args: compare.csv, compare.png, A's name, B's name.
write_compare_plot <- function(args) {
  dt <- fread(args[1], colClasses = list(character = c("cell", "metric", "verdict", "test")))
  p <- compare_plot(dt, args[3], args[4])
  ggsave(args[2], p, width = 11, height = 2 + 0.3 * nrow(dt), dpi = 100, limitsize = FALSE)
}
