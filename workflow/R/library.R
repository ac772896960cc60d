# dbsweep's analysis library: every file of this folder, sourced into the
# caller's global environment. Source it with chdir = TRUE, as in
# `source(".../workflow/R/library.R", chdir = TRUE)`.
# The rule scripts (workflow/scripts/analysis.R) and the tests load it so.

# ggplot2 takes most of R's start (0.7 of about 1.4 s): a rule that draws nothing sets
# options(dbsweep.plots = FALSE) before sourcing, and goes without it.
suppressPackageStartupMessages({
  library(data.table)
  if (!isFALSE(getOption("dbsweep.plots"))) library(ggplot2)
})

for (.file in setdiff(sort(list.files(".", "\\.R$")), "library.R")) source(.file)
rm(.file)
