# The plot of `./dbsweep compare A B`: loads the analysis library (workflow/R) and draws it.
# Usage: Rscript compare_plot.R compare.csv compare.png "A name" "B name"
here <- dirname(sub("^--file=", "", grep("^--file=", commandArgs(FALSE), value = TRUE)))
source(file.path(here, "..", "R", "library.R"), chdir = TRUE)
write_compare_plot(commandArgs(trailingOnly = TRUE))
