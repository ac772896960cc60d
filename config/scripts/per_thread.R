# An example of your own analysis (analysis.scripts; config/README.md, "Your own analysis"):
# per-second throughput per client thread, per cell, as a table and a plot.
#
# dbsweep runs it as `Rscript per_thread.R INPUTS OUT`: INPUTS is a JSON file naming the long tables
# (tables$samples, tables$cell_stats_csv, ...) and their columns; OUT is this script's folder,
# results/user/per_thread/. Everything it writes there appears in the report.
suppressPackageStartupMessages({
  library(data.table)
  library(ggplot2)
})

args <- commandArgs(trailingOnly = TRUE)
inputs <- jsonlite::fromJSON(args[1])
out <- args[2]
axes <- inputs$axes

# The statistics rule's per-cell medians of the steady-state windows (metric tps or iops).
cells <- fread(inputs$tables$cell_stats_csv, colClasses = list(character = setdiff(axes, "threads")))
cells <- cells[metric %in% c("tps", "iops")]
if (!"threads" %in% axes) cells[, threads := 1L]
cells[, per_thread := median / threads]
table <- cells[, c(axes, "metric", "median", "per_thread"), with = FALSE]
fwrite(table, file.path(out, "per_thread.csv"))

others <- setdiff(axes, "threads")
cells[, cell := if (length(others)) do.call(paste, c(.SD, sep = ", ")) else "all", .SDcols = others]
p <- ggplot(cells, aes(threads, per_thread, colour = cell)) +
  geom_line() +
  geom_point() +
  labs(title = "Throughput per thread", x = "threads", y = paste(unique(cells$metric), "per thread"),
       colour = NULL, caption = sprintf("study %s", inputs$study)) +
  theme_bw() +
  theme(legend.position = "bottom", legend.direction = "vertical")
ggsave(file.path(out, "per_thread.png"), p, width = 7, height = 5, dpi = 100)
cat(sprintf("per_thread: %d cells\n", nrow(cells)))
