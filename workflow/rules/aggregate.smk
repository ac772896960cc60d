# aggregate: every repetition's tidy files -> the long tables (results/tables/*.csv.gz, *.parquet).

TABLES = "results/tables"


rule aggregate:
    input:
        known_now(aggregate_input),
    output:
        **{name: f"{TABLES}/{name}.csv.gz" for name in workloads.tables()},  # the workloads' own tables
        summary=f"{TABLES}/summary.csv.gz",
        samples=f"{TABLES}/samples.csv.gz",
        system=f"{TABLES}/system.csv.gz",
        counters=f"{TABLES}/counters.csv.gz",
        percentiles=f"{TABLES}/percentiles.csv.gz",
        events=f"{TABLES}/events.csv.gz",
        recovery=f"{TABLES}/recovery.csv.gz",
        delivered=f"{TABLES}/delivered.csv.gz",
        summary_parquet=f"{TABLES}/summary.parquet",
        samples_parquet=f"{TABLES}/samples.parquet",
        system_parquet=f"{TABLES}/system.parquet",
        counters_parquet=f"{TABLES}/counters.parquet",
        percentiles_parquet=f"{TABLES}/percentiles.parquet",
        provenance=f"{TABLES}/provenance.json",
        not_applicable=f"{TABLES}/not_applicable.csv",
    log:
        "results/logs/aggregate.log",
    localrule: True  # reads every repetition's files: where snakemake runs
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
        study=STUDY.name,
        not_applicable=STUDY.not_applicable,
    script:
        "../scripts/aggregate.py"


# canary_table: the canary's runs as a series of their own (results/tables/canary.csv, dbsweep/canary.py).
rule canary_table:
    input:
        known_now(canary_input),
    output:
        f"{TABLES}/canary.csv",
    log:
        "results/logs/canary_table.log",
    localrule: True
    params:
        every=STUDY.canary_every,
        total=canary_total,
    script:
        "../scripts/canary.py"


# round_tables, round_noise: with repeat_until (dbsweep/rounds.py), the long tables of rounds 1..k and their
# run-to-run noise; the checkpoint's verdict decides whether round k + 1 runs.
rule round_tables:
    input:
        round_input,
    output:
        temp(directory(f"{rounds.ROOT}/tables~{{round}}")),
    log:
        f"results/logs/round_tables/round~{{round}}.log",
    localrule: True
    params:
        axes=STUDY.axes,
        study=STUDY.name,
    script:
        "../scripts/aggregate.py"


checkpoint round_noise:
    input:
        tables=rules.round_tables.output[0],
        library=R_LIBRARY,
        canaries=round_canaries,  # waited for, not read: the canary after the round comes before the next
    output:
        f"{rounds.ROOT}/round~{{round}}.csv",
    log:
        "results/logs/round_noise/round~{round}.log",
    localrule: True
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
        analysis=ANALYSIS,
        round=lambda wildcards: int(wildcards.round),
    script:
        "../scripts/analysis.R"
