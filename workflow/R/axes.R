# Axes: which vary, their values in reading order, labels and pivots, and
# what a table says when the study lacks an axis.

# Axes whose value differs between rows.
varying_axes <- function(dt, axes) {
  axes[vapply(axes, function(a) uniqueN(dt[[a]]) > 1, TRUE)]
}

# "filesystem = ext4, threads = 4": the axes that are the same in every row,
# said once instead of on every label; an axis no row has a value for (NA:
# engine of storage cells) is left out. NULL when none is left.
fixed_axes_text <- function(dt, axes) {
  fixed <- setdiff(axes, varying_axes(dt, axes))
  if (nrow(dt) == 0) return(NULL)
  fixed <- fixed[!vapply(fixed, function(a) is.na(dt[[a]][1]), TRUE)]
  if (!length(fixed)) return(NULL)
  values <- vapply(fixed, function(a) as.character(dt[[a]][1]), "")
  paste(sprintf("%s = %s", fixed, values), collapse = ", ")
}

NO_DATABASE_CELLS <- "not applicable: this study has no database cells (tool sysbench)"

# What a table or plot says when the study cannot give it.
not_applicable <- function(missing) {
  if (length(missing) == 0) return(NULL)
  sprintf("not applicable: this study has no %s",
          paste(sprintf("%s axis", missing), collapse = " and no "))
}

# ---------------------------------------------------------------------------
# Order of axis values

# Sizes as servers read them ("64M", "1G", "512k", "2GiB", "1048576"), in
# bytes with binary multiples; NA where x is not a size.
size_bytes <- function(x) {
  x <- trimws(as.character(x))
  m <- regmatches(x, regexec("^([0-9]+(\\.[0-9]+)?)\\s*([kKmMgGtTpP]?)(i?[bB])?$", x))
  vapply(m, function(parts) {
    if (length(parts) == 0) return(NA_real_)
    power <- match(toupper(parts[4]), c("K", "M", "G", "T", "P"), nomatch = 0L)
    as.numeric(parts[2]) * 1024^power
  }, 0)
}

# Values some axes take, in the order people read them (baselines first).
AXIS_ORDER <- list(
  engine = c("innodb", "myrocks", "postgresql"),
  binlog = c("off", "sync0", "sync1", "sync1000", "sync10000"),
  durability = c("default", "tuned", "unsafe"),
  isolation = c("RR", "RC"),
  version = "debian"  # Debian's own packages: MariaDB 10.11, PostgreSQL 15
)

# The study's own order of its axes' values (a list: axis -> values as declared), ahead of the
# built-in one; the rules pass it as the param axis_values.
declare_axis_order <- function(values) {
  for (axis in names(values)) {
    AXIS_ORDER[[axis]] <<- as.character(unlist(values[[axis]]))
  }
  invisible(AXIS_ORDER)
}

# Text whose runs of digits compare as numbers: "sync2" < "sync10",
# "10.11.5" < "11.4" < "16", "build-9" < "build-10" (digits pad to 20 places).
natural_key <- function(x) {
  parts <- regmatches(x, gregexpr("[0-9]+|[^0-9]+", x))
  vapply(parts, function(p) {
    digits <- grepl("^[0-9]", p)
    p[digits] <- paste0(strrep("0", pmax(0, 20 - nchar(p[digits]))), p[digits])
    paste(p, collapse = "")
  }, "")
}

# The distinct values of an axis (NA left out) in reading order: the known
# order of the axis first; then numbers by value, sizes by bytes (memory
# 64M < 256M < 1G), other text naturally.
axis_levels <- function(x, axis = "") {
  values <- unique(as.character(x[!is.na(x)]))
  if (length(values) == 0) return(character())
  known <- AXIS_ORDER[[axis]]
  first <- known[known %in% values]
  rest <- setdiff(values, first)
  if (length(rest)) {
    numbers <- suppressWarnings(as.numeric(rest))
    bytes <- size_bytes(rest)
    rest <- if (!anyNA(numbers)) {
      rest[order(numbers)]
    } else if (!anyNA(bytes)) {
      rest[order(bytes, rest)]
    } else {
      rest[order(natural_key(rest), rest, method = "radix")]
    }
  }
  c(first, rest)
}

axis_factor <- function(x, axis) {
  factor(as.character(x), levels = axis_levels(x, axis))
}

# Axis columns as factors in reading order (for plots and dcast), and back.
with_axis_factors <- function(dt, cols) {
  dt <- copy(dt)
  for (a in cols) set(dt, j = a, value = axis_factor(dt[[a]], a))
  dt
}

without_axis_factors <- function(dt, cols) {
  for (a in intersect(cols, names(dt))) {
    value <- as.character(dt[[a]])
    if (a %in% INTEGER_COLUMNS) value <- as.integer(value)
    set(dt, j = a, value = value)
  }
  dt
}

# Sorts dt in place by the given axes, each in reading order (NA last).
order_by_axes <- function(dt, cols) {
  if (length(cols) == 0 || nrow(dt) == 0) return(invisible(dt))
  ranks <- paste0(".rank_", seq_along(cols))
  for (i in seq_along(cols)) {
    x <- dt[[cols[i]]]
    set(dt, j = ranks[i], value = match(as.character(x), axis_levels(x, cols[i])))
  }
  setorderv(dt, ranks, na.last = TRUE)
  dt[, (ranks) := NULL]
  invisible(dt)
}

# Long to wide: one row per combination of `rows`, one column per value of
# `col`, both in reading order (memory by size); rows' columns keep their type.
pivot_axis <- function(dt, rows, col, value) {
  dt <- with_axis_factors(dt, c(rows, col))
  lhs <- if (length(rows)) paste(sprintf("`%s`", rows), collapse = " + ") else "."
  wide <- dcast(dt, stats::as.formula(sprintf("%s ~ `%s`", lhs, col)),
                value.var = value)
  if (!length(rows)) wide[, "." := NULL]
  without_axis_factors(wide, rows)
}


# A one-row table saying why there is nothing to show (two columns, so that
# readers that guess the separator, like fread, read it back whole).
not_applicable_table <- function(message) {
  dt <- data.table(status = "not applicable", note = message)
  setattr(dt, "not_applicable", message)
  dt
}
