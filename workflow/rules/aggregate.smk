# aggregate: every repetition's tidy files -> the long tables (results/tables/*.csv.gz, *.parquet).

TABLES = "results/tables"

rule aggregate:
    localrule: True  # reads every repetition's files: where snakemake runs
    input:
        known_now(aggregate_input),
    output:
        summary=f"{TABLES}/summary.csv.gz",
        samples=f"{TABLES}/samples.csv.gz",
        system=f"{TABLES}/system.csv.gz",
        counters=f"{TABLES}/counters.csv.gz",
        **{name: f"{TABLES}/{name}.csv.gz" for name in workloads.tables()},  # the workloads' own tables
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
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
        study=STUDY.name,
        not_applicable=STUDY.not_applicable,
    log:
        "results/logs/aggregate.log",
    script:
        "../scripts/aggregate.py"


# canary_table: the canary's runs as a series of their own (results/tables/canary.csv, dbsweep/canary.py).
rule canary_table:
    localrule: True
    input:
        known_now(canary_input),
    output:
        f"{TABLES}/canary.csv",
    params:
        every=STUDY.canary_every,
        total=canary_total,
    log:
        "results/logs/canary_table.log",
    script:
        "../scripts/canary.py"


# round_tables, round_noise: with repeat_until (dbsweep/rounds.py), the long tables of rounds 1..k and their
# run-to-run noise; the checkpoint's verdict decides whether round k + 1 runs.
rule round_tables:
    localrule: True
    input:
        round_input,
    output:
        temp(directory(f"{rounds.ROOT}/tables~{{round}}")),
    params:
        axes=STUDY.axes,
        study=STUDY.name,
    log:
        f"results/logs/round_tables/round~{{round}}.log",
    script:
        "../scripts/aggregate.py"


checkpoint round_noise:
    localrule: True
    input:
        tables=rules.round_tables.output[0],
        library=R_LIBRARY,
        canaries=round_canaries,  # waited for, not read: the canary after the round comes before the next
    output:
        f"{rounds.ROOT}/round~{{round}}.csv",
    params:
        axes=STUDY.axes,
        axis_values=STUDY.axis_values,
        analysis=ANALYSIS,
        round=lambda wildcards: int(wildcards.round),
    log:
        "results/logs/round_noise/round~{round}.log",
    script:
        "../scripts/analysis.R"
