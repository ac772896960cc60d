# Every R rule's script: loads the analysis library (workflow/R) and calls the
# rule's function, rule_<rule name>, with Snakemake's input, output and params.

# R compiles each function to bytecode at its first call (JIT level 3). On a small study that
# compiling is most of a rule's time (1.2 of 1.5 s in rule statistics for one cell); from about a
# thousand cells on it pays back (2,000 cells: statistics 3.8 s with it, 4.5-5.1 s without). So
# the compiler runs only when the rule's data (the library's files aside) is over 2 MB.
data_paths <- unlist(snakemake@input[names(snakemake@input) != "library"])
data_paths <- c(data_paths[!dir.exists(data_paths)],  # a folder (rule statistics' series): its files
                list.files(data_paths[dir.exists(data_paths)], full.names = TRUE, all.files = TRUE, no.. = TRUE))
data_bytes <- sum(file.size(data_paths), na.rm = TRUE)
invisible(compiler::enableJIT(if (data_bytes > 2e6) 3L else 0L))
# The rules that write only tables go without ggplot2 (library.R).
options(dbsweep.plots = !snakemake@rule %in% c("statistics", "round_noise", "tables", "db_tables", "tpcc_table"))
source(file.path(snakemake@scriptdir, "..", "R", "library.R"), chdir = TRUE)
options(dbsweep.cores = snakemake@threads)  # rule statistics works through its chunks of cells so
declare_axis_order(snakemake@params$axis_values)
get(paste0("rule_", snakemake@rule))(snakemake@input, snakemake@output, snakemake@params)
