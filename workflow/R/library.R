# dbsweep's analysis library: every file of this folder, sourced into the
# caller's global environment. Source it with chdir = TRUE:
#   source(".../workflow/R/library.R", chdir = TRUE)
# The rule scripts (workflow/scripts/analysis.R) and the tests load it so.

suppressPackageStartupMessages({
  library(data.table)
  library(ggplot2)
})

for (.file in setdiff(sort(list.files(".", "\\.R$")), "library.R")) source(.file)
rm(.file)
