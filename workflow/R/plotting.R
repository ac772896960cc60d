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
      legend.box = "vertical",  # several legends stack, not run off the right edge
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
  paste(wrap_text(c(machine, software), 150), collapse = "\n")
}

# 12,345 on axes.
thousands <- function(x) {
  format(x, big.mark = ",", scientific = FALSE, trim = TRUE)
}

# A plot that says there is nothing to draw, so the rule still has its output.
empty_plot <- function(title, message, caption) {
  ggplot() +
    annotate("text", x = 0, y = 0, label = wrap_text(message, 70), size = 4) +
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
    save_plot(p, output[[name]])
  }
  if (!length(skipped)) return(data.table(plot = character(), reason = character()))
  rbindlist(skipped)
}

# The image is plot_size(p) unless width and height are given.
save_plot <- function(p, path, width = plot_size(p)[["width"]],
                      height = plot_size(p)[["height"]], dpi = 110) {
  dir.create(dirname(path), recursive = TRUE, showWarnings = FALSE)
  # ragg's AGG device: the same image as cairo's png, a quarter less CPU to draw
  ragg::agg_png(path, width = width, height = height, units = "in", res = dpi)
  on.exit(grDevices::dev.off())
  print(p)
  invisible(path)
}

# ---------------------------------------------------------------------------
# Labels: a plot names only the axes that vary among its own rows, never NA

# Characters of 11-point text per inch of a plot, for wrapping.
CHARS_PER_INCH <- 12

# "engine=innodb, memory=16M": each row's values of the axes `vary`. An axis
# a row has no value for (NA: engine and memory of a storage cell) is left out
# of that row's label; `empty` when nothing is left.
configuration_label <- function(dt, vary, sep = ", ", empty = "all") {
  if (!length(vary) || nrow(dt) == 0) return(rep(empty, nrow(dt)))
  parts <- lapply(vary, function(a) {
    v <- as.character(dt[[a]])
    ifelse(is.na(v), NA_character_, paste0(a, "=", v))
  })
  out <- do.call(mapply, c(list(FUN = function(...) {
    p <- c(...)
    paste(p[!is.na(p)], collapse = sep)
  }, USE.NAMES = FALSE), parts))
  out <- as.character(out)
  out[out == ""] <- empty
  out
}

# Each string broken at spaces into lines of at most `width` characters (a
# longer word stays whole); NULL stays NULL.
wrap_text <- function(x, width) {
  if (is.null(x) || !is.finite(width)) return(x)
  vapply(as.character(x), function(s) paste(strwrap(s, width), collapse = "\n"), "",
         USE.NAMES = FALSE)
}

# Per row of dt, a factor of the configuration_label() of the axes `vary`
# (wrapped to `width`), its levels in the reading order of those axes.
cell_factor <- function(dt, vary, sep = ", ", width = Inf) {
  if (!length(vary)) return(factor(rep("all", nrow(dt))))
  cells <- unique(as.data.table(dt)[, vary, with = FALSE])
  order_by_axes(cells, vary)
  labels <- wrap_text(configuration_label(cells, vary, sep), width)
  key <- function(d) do.call(paste, c(lapply(vary, function(a) as.character(d[[a]])), sep = "\r"))
  factor(labels[match(key(dt), key(cells))], levels = unique(labels))
}

# The facet strips' labeller: "engine=innodb, memory=16M" from the facet's
# axes, NA left out, wrapped to `width` characters.
axes_labeller <- function(width = 40) {
  structure(function(labels) {
    vary <- names(labels)
    empty <- paste("no", paste(vary, collapse = ", "))
    list(wrap_text(configuration_label(as.data.table(labels), vary, empty = empty), width))
  }, class = c("function", "labeller"))
}

# Characters a strip of one of `cols` panels side by side holds.
strip_width <- function(cols, width = 8) {
  max(12, floor(width * CHARS_PER_INCH / max(1, cols)) - 3)
}

# The parts that are given, joined by "; " and wrapped to the plot's width
# (never inside "filesystem = xfs"); NULL when none is.
plot_subtitle <- function(..., width = 8) {
  parts <- unlist(list(...))
  if (!length(parts)) return(NULL)
  text <- gsub(" = ", "~=~", paste(parts, collapse = "; "), fixed = TRUE)
  gsub("~=~", " = ", wrap_text(text, floor(width * CHARS_PER_INCH) - 4), fixed = TRUE)
}

# Columns of a legend whose entries are `labels`, so it fits a plot `width`
# inches wide; a guides() for `aesthetics`.
legend_in_columns <- function(labels, aesthetics = "colour", width = 8) {
  lines <- unlist(strsplit(as.character(labels), "\n", fixed = TRUE))
  longest <- max(1, nchar(lines))
  ncol <- max(1, min(length(labels), floor(width * CHARS_PER_INCH / (longest + 5))))
  guide <- guide_legend(ncol = ncol, byrow = TRUE)
  do.call(guides, stats::setNames(rep(list(guide), length(aesthetics)), aesthetics))
}

# ---------------------------------------------------------------------------
# Panel layout: facets by axes, and image sizes that follow the panels

# facet_grid over rows ~ cols (each possibly empty), values labelled with
# their axis; NULL when there is nothing to facet by.
facet_axes <- function(rows = character(), cols = character(),
                       labeller = axes_labeller(), ...) {
  if (!length(rows) && !length(cols)) return(NULL)
  side <- function(a) if (length(a)) paste(sprintf("`%s`", a), collapse = " + ") else "."
  facet_grid(stats::as.formula(paste(side(rows), "~", side(cols))),
             labeller = labeller, ...)
}

# Panels for the given axes: a wrap for one axis; for more, one row per
# combination of all but the last and one column per value of the last
# (engine ~ memory; filesystem + memory ~ binlog). Strips name the axes and
# wrap to the panel's width. list(facet, rows, cols).
panel_layout <- function(dt, facets, ...) {
  if (!length(facets)) return(list(facet = NULL, rows = 1L, cols = 1L))
  if (length(facets) == 1) {
    dims <- wrap_dims(n_combinations(dt, facets))
    return(list(facet = facet_wrap(facets, labeller = axes_labeller(strip_width(dims[2])),
                                   ...),
                rows = dims[1], cols = dims[2]))
  }
  row_axes <- utils::head(facets, -1)
  cols <- n_combinations(dt, utils::tail(facets, 1))
  list(facet = facet_axes(row_axes, utils::tail(facets, 1),
                          labeller = axes_labeller(strip_width(cols)), ...),
       rows = n_combinations(dt, row_axes), cols = cols)
}

# Inches for a plot with `rows` rows of panels.
plot_height <- function(rows, per_row = 1.7, min = 5, max = 30) {
  min(max, max(min, 2.2 + per_row * rows))
}

# The plot with its rows of panels (attr "panel_rows") and the image size
# they need (attr "size", read by save_plot): 8 x 5 in up to two rows.
with_panel_rows <- function(p, rows, per_row = 1.7) {
  setattr(p, "panel_rows", rows)
  with_size(p, c(width = 8, height = if (rows <= 2) 5 else plot_height(rows, per_row)))
}

with_size <- function(p, size) {
  setattr(p, "size", size)
  p
}

n_combinations <- function(dt, cols) {
  if (length(cols)) nrow(unique(dt[, ..cols])) else 1L
}

# Inches for the plot: its attr "size", 8 x 5 when it has none.
plot_size <- function(p) {
  size <- attr(p, "size")
  if (is.null(size)) c(width = 8, height = 5) else size
}
