# collect: tidy per-second samples, system metrics and a summary from one repetition's raw output.


rule collect:
    input:
        f"{RUNS}/{{cell}}/rep~{{rep}}/run.json",
    output:
        samples=f"{RUNS}/{{cell}}/rep~{{rep}}/samples.csv",
        system=f"{RUNS}/{{cell}}/rep~{{rep}}/system.csv",
        counters=f"{RUNS}/{{cell}}/rep~{{rep}}/counters.csv",
        summary=f"{RUNS}/{{cell}}/rep~{{rep}}/summary.json",
        percentiles=f"{RUNS}/{{cell}}/rep~{{rep}}/percentiles.csv",
    log:
        f"results/logs/collect/{{cell}}/rep~{{rep}}.log",
    script:
        "../scripts/collect.py"
