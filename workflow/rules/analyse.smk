# aggregate, then the R analysis: long tables in, comparison tables and plots out.
TABLES = "results/tables"
PLOTS = "results/plots"


rule aggregate:
    input:
        expand("{rep_dir}/{name}", rep_dir=rep_dirs(), name=["run.json", "summary.json", "samples.csv", "system.csv"]),
    output:
        summary=f"{TABLES}/summary.csv.gz",
        samples=f"{TABLES}/samples.csv.gz",
        system=f"{TABLES}/system.csv.gz",
        provenance=f"{TABLES}/provenance.json",
    params:
        axes=STUDY.axes,
        study=STUDY.name,
        rep_dirs=rep_dirs(),
    log:
        "results/logs/aggregate.log",
    script:
        "../scripts/aggregate.py"


rule tables:
    input:
        **rules.aggregate.output,
        script=f"{SCRIPTS}/tables.R",
        common=f"{SCRIPTS}/common.R",
    output:
        cells_csv=report(f"{TABLES}/cells.csv", caption="../report/cells.rst", category="Tables"),
        cells_md=f"{TABLES}/cells.md",
        saturation_csv=report(f"{TABLES}/saturation.csv", caption="../report/saturation.rst", category="Tables"),
        saturation_md=f"{TABLES}/saturation.md",
    params:
        axes=STUDY.axes,
    log:
        "results/logs/tables.log",
    script:
        "../scripts/tables.R"


rule plots:
    input:
        **rules.aggregate.output,
        script=f"{SCRIPTS}/plots.R",
        common=f"{SCRIPTS}/common.R",
    output:
        throughput=report(f"{PLOTS}/throughput_vs_threads.png", caption="../report/throughput.rst", category="Plots"),
        latency=report(f"{PLOTS}/latency_vs_threads.png", caption="../report/latency.rst", category="Plots"),
        jitter=report(f"{PLOTS}/jitter.png", caption="../report/jitter.rst", category="Plots"),
        boxplot=report(f"{PLOTS}/boxplot.png", caption="../report/boxplot.rst", category="Plots"),
    params:
        axes=STUDY.axes,
    log:
        "results/logs/plots.log",
    script:
        "../scripts/plots.R"
