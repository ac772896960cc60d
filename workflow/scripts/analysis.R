# Every R rule's script: loads the analysis library (workflow/R) and calls the
# rule's function, rule_<rule name>, with Snakemake's input, output and params.
# The rules that write only tables go without ggplot2 (library.R).
options(dbsweep.plots = !snakemake@rule %in% c("statistics", "tables", "db_tables", "tpcc_table"))
source(file.path(snakemake@scriptdir, "..", "R", "library.R"), chdir = TRUE)
declare_axis_order(snakemake@params$axis_values)
get(paste0("rule_", snakemake@rule))(snakemake@input, snakemake@output, snakemake@params)
