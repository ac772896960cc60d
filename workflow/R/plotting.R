# The plotting kit: palette, theme, caption, empty and skipped plots, PNG output.

# ---------------------------------------------------------------------------
# Plots

# The memory axis's title: the cache each engine sizes by it.
MEMORY_TITLE <- "memory (buffer pool / block cache / shared_buffers)"

# Okabe-Ito, reordered so the first colours are the most distinct on white.
OKABE_ITO <- c("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00",
               "#56B4E9", "#000000", "#F0E442")

dbsweep_palette <- function(n) {
  if (n <= length(OKABE_ITO)) return(OKABE_ITO[seq_len(n)])
  grDevices::hcl.colors(n, "viridis")
}

scale_colour_dbsweep <- function(...) {
  discrete_scale("colour", "dbsweep", dbsweep_palette, ...)
}

scale_fill_dbsweep <- function(...) {
  discrete_scale("fill", "dbsweep", dbsweep_palette, ...)
}

theme_dbsweep <- function(base_size = 11) {
  theme_bw(base_size = base_size) +
    theme(
      panel.grid.minor = element_blank(),
      strip.background = element_rect(fill = "grey92", colour = NA),
      legend.position = "bottom",
      plot.title.position = "plot",
      plot.caption.position = "plot",
      plot.caption = element_text(hjust = 0, colour = "grey35",
                                  size = rel(0.75)),
      plot.subtitle = element_text(colour = "grey25")
    )
}

# The caption under every plot: where and with what the numbers were made.
caption_text <- function(provenance) {
  field <- function(name) {
    v <- provenance[[name]]
    if (is.null(v) || length(v) == 0 || all(is.na(v)) || identical(v, "")) {
      return("unknown")
    }
    paste(as.character(v), collapse = " ")
  }
  machine <- sprintf("host %s, CPU %s, kernel %s", field("host"), field("cpu"),
                     field("kernel"))
  if (!is.null(provenance[["memory_gb"]])) {
    machine <- sprintf("%s, %s GB RAM", machine,
                       format(round(as.numeric(provenance[["memory_gb"]]), 1)))
  }
  tools <- unique(unlist(provenance[["tools"]]))
  tools <- if (length(tools)) paste(tools, collapse = ", ") else "unknown"
  software <- sprintf("tools: %s", tools)
  if (!is.null(provenance[["study"]])) {
    software <- sprintf("%s; study: %s", software, field("study"))
  }
  paste(machine, software, sep = "\n")
}

# 12,345 on axes.
thousands <- function(x) {
  format(x, big.mark = ",", scientific = FALSE, trim = TRUE)
}

# A plot that says there is nothing to draw, so the rule still has its output.
empty_plot <- function(title, message, caption) {
  ggplot() +
    annotate("text", x = 0, y = 0, label = message, size = 4) +
    labs(title = title, caption = caption, x = NULL, y = NULL) +
    theme_dbsweep() +
    theme(axis.text = element_blank(), axis.ticks = element_blank())
}

# A plot kind the data cannot support: why, instead of a ggplot. save_plots()
# draws the reason as the image and lists it in skipped_plots.csv.
skipped_plot <- function(reason) {
  structure(list(reason = reason), class = "dbsweep_skipped")
}

is_skipped_plot <- function(p) inherits(p, "dbsweep_skipped")

# Saves every plot of the named list `plots` to output[[name]] (a skipped one
# as an image saying why) and returns the skipped ones: data.table(plot,
# reason), the rows of skipped_plots.csv.
save_plots <- function(plots, output, caption, titles = list()) {
  skipped <- list()
  for (name in names(plots)) {
    p <- plots[[name]]
    if (is_skipped_plot(p)) {
      skipped[[name]] <- data.table(plot = name, reason = p$reason)
      title <- if (is.null(titles[[name]])) name else titles[[name]]
      p <- empty_plot(title, paste("skipped:", p$reason), caption)
    }
    size <- attr(p, "size")
    if (is.null(size)) size <- c(width = 8, height = 5)
    save_plot(p, output[[name]], width = size[["width"]], height = size[["height"]])
  }
  if (!length(skipped)) return(data.table(plot = character(), reason = character()))
  rbindlist(skipped)
}

save_plot <- function(p, path, width = 8, height = 5, dpi = 110) {
  dir.create(dirname(path), recursive = TRUE, showWarnings = FALSE)
  type <- if (capabilities("cairo")) "cairo" else getOption("bitmapType")
  grDevices::png(path, width = width, height = height, units = "in",
                 res = dpi, type = type)
  on.exit(grDevices::dev.off())
  print(p)
  invisible(path)
}

# ---------------------------------------------------------------------------
# Panel layout: facets by axes, and image sizes for rows of panels

# facet_grid over rows ~ cols (each possibly empty), values labelled with
# their axis; NULL when there is nothing to facet by.
facet_axes <- function(rows = character(), cols = character(),
                       labeller = label_both, ...) {
  if (!length(rows) && !length(cols)) return(NULL)
  side <- function(a) if (length(a)) paste(sprintf("`%s`", a), collapse = " + ") else "."
  facet_grid(stats::as.formula(paste(side(rows), "~", side(cols))),
             labeller = labeller, ...)
}

# Panels for the given axes: a wrap for one axis; for more, one row per
# combination of all but the last and one column per value of the last
# (engine ~ memory; filesystem + memory ~ binlog). list(facet, rows).
panel_layout <- function(dt, facets, ...) {
  if (!length(facets)) return(list(facet = NULL, rows = 1L))
  if (length(facets) == 1) {
    return(list(facet = facet_wrap(facets, labeller = label_both, ...),
                rows = wrap_rows(n_combinations(dt, facets))))
  }
  row_axes <- utils::head(facets, -1)
  list(facet = facet_axes(row_axes, utils::tail(facets, 1), ...),
       rows = n_combinations(dt, row_axes))
}

# Inches for a plot with `rows` rows of panels.
plot_height <- function(rows, per_row = 1.7, min = 5, max = 30) {
  min(max, max(min, 2.2 + per_row * rows))
}

# How many rows of panels a plot has: attr "panel_rows" (1 when unset).
with_panel_rows <- function(p, rows) {
  setattr(p, "panel_rows", rows)
  p
}

n_combinations <- function(dt, cols) {
  if (length(cols)) nrow(unique(dt[, ..cols])) else 1L
}

wrap_rows <- function(panels) {
  wrap_dims(panels)[1]
}

# Taller images for plots with many rows of panels.
plot_size <- function(p) {
  rows <- attr(p, "panel_rows")
  if (is.null(rows) || rows <= 2) return(c(width = 8, height = 5))
  c(width = 8, height = plot_height(rows))
}
