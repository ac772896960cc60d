# Markdown tables and CSV output.

# ---------------------------------------------------------------------------
# Markdown tables

# Numbers as a person reads them: integers as they are; other values to three
# significant digits, those of 1000 and more rounded with thousands separators.
format_number <- function(x) {
  out <- rep("NA", length(x))
  ok <- !is.na(x)
  if (is.integer(x)) {
    out[ok] <- as.character(x[ok])
    return(out)
  }
  out[ok & !is.finite(x)] <- as.character(x[ok & !is.finite(x)])
  ok <- is.finite(x)
  r <- signif(x, 3)
  big <- ok & abs(r) >= 1000
  small <- ok & !big
  out[big] <- with_thousands_separators(round(x[big]))
  v <- r[small]
  digits <- pmax(0, 2 - floor(log10(abs(v))))
  digits[v == 0] <- 0
  text <- character(length(v))
  for (d in unique(digits)) {
    text[digits == d] <- formatC(v[digits == d], format = "f", digits = d)
  }
  text[v == 0] <- "0"
  out[small] <- text
  out
}

# Whole numbers with "," between groups of three digits, as formatC(x, format = "d", big.mark = ",") wrote
# them, without its per-value R loop (prettyNum: 12 s for 300,000 numbers) and its limit to 32-bit integers
# (NA beyond).
with_thousands_separators <- function(x) {
  digits <- sprintf("%.0f", abs(x))
  n <- nchar(digits)
  lead <- (n - 1L) %% 3L + 1L
  out <- substr(digits, 1L, lead)
  groups <- (n - 1L) %/% 3L
  for (j in seq_len(max(0L, groups))) {
    has <- groups >= j
    end <- lead[has] + 3L * j
    out[has] <- paste0(out[has], ",", substr(digits[has], end - 2L, end))
  }
  out[x < 0] <- paste0("-", out[x < 0])
  out
}

md_cells <- function(x) {
  if (is.numeric(x)) return(format_number(x))
  out <- as.character(x)
  out[is.na(out)] <- "NA"
  gsub("|", "\\|", out, fixed = TRUE)
}

# A pipe table's lines: header, alignment, then `body` (one line per row of dt: md_body_lines(), or lines
# made before of the same rows, e.g. rule statistics' cache).
md_lines <- function(dt, body = md_body_lines(dt)) {
  cols <- names(dt)
  align <- vapply(dt, function(x) if (is.numeric(x)) "---:" else ":---", "")
  row <- function(v) paste0("| ", paste(v, collapse = " | "), " |")
  c(row(cols), row(align), body)
}

# One table line per row of dt.
md_body_lines <- function(dt) {
  if (nrow(dt) == 0) return(character())
  paste0("| ", do.call(paste, c(unname(lapply(dt, md_cells)), sep = " | ")), " |")
}

# Writes dt as a GitHub pipe table. With group_by, one table per group under a
# "### axis=value, ..." heading (axes without a value left out), without the group columns. preamble goes
# above, caption (e.g. caption_text(provenance)) below.
write_md_table <- function(dt, path, group_by = NULL, preamble = NULL,
                           caption = NULL) {
  out <- character()
  if (length(preamble)) out <- c(preamble, "")
  out <- c(out, md_table_lines(dt, group_by))
  write_md_lines(out, path, caption)
}

# The lines of write_md_table() without preamble and caption, so that one file
# can hold several tables. body: md_body_lines() of dt without the group_by columns, when made before.
md_table_lines <- function(dt, group_by = NULL, body = NULL) {
  dt <- as.data.table(dt)
  shown <- dt[, setdiff(names(dt), group_by), with = FALSE]
  if (is.null(body)) body <- md_body_lines(shown)  # every row at once (a thousand sections: one call)
  if (!length(group_by)) return(c(md_lines(shown, body), ""))
  groups <- dt[, ..group_by]
  group <- groups[, .g := .GRP, by = group_by]$.g  # groups in order of first appearance, as split(sorted = FALSE)
  groups <- unique(groups[, .g := NULL])
  top <- md_lines(shown[0L])
  headings <- paste("###", configuration_label(groups, group_by))
  rows <- split(body, group)
  as.character(unlist(lapply(seq_along(rows), function(i) c(headings[i], "", top, rows[[i]], "")),
                      use.names = FALSE))
}

# Writes markdown lines with the caption (if any) in italics below.
write_md_lines <- function(lines, path, caption = NULL) {
  out <- lines
  if (length(caption)) out <- c(out, paste0("_", gsub("\n", "; ", caption), "_"), "")
  dir.create(dirname(path), recursive = TRUE, showWarnings = FALSE)
  writeLines(out, path)
  invisible(path)
}


# A CSV table, its folder made if needed.
write_csv <- function(dt, path) {
  dir.create(dirname(path), recursive = TRUE, showWarnings = FALSE)
  fwrite(dt, path)
}
