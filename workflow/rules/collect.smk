# collect: tidy per-second samples, system metrics, a summary and the workloads' own tables from one
# repetition's raw output.


rule collect:
    input:
        f"{RUNS}/{{cell}}/rep~{{rep}}/run.json",
    output:
        **{name: f"{RUNS}/{{cell}}/rep~{{rep}}/{name}.csv" for name in workloads.tables()},  # workloads' own
        samples=f"{RUNS}/{{cell}}/rep~{{rep}}/samples.csv",
        system=f"{RUNS}/{{cell}}/rep~{{rep}}/system.csv",
        counters=f"{RUNS}/{{cell}}/rep~{{rep}}/counters.csv",
        summary=f"{RUNS}/{{cell}}/rep~{{rep}}/summary.json",
        percentiles=f"{RUNS}/{{cell}}/rep~{{rep}}/percentiles.csv",
        events=f"{RUNS}/{{cell}}/rep~{{rep}}/events.csv",
        recovery=f"{RUNS}/{{cell}}/rep~{{rep}}/recovery.csv",
        delivered=f"{RUNS}/{{cell}}/rep~{{rep}}/delivered.csv",
    log:
        f"results/logs/collect/{{cell}}/rep~{{rep}}.log",
    group:
        repetition_group
    resources:
        sbatch=SBATCH,  # on Slurm: its run's job
    script:
        "../scripts/collect.py"
