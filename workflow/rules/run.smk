# run: one measured repetition of one cell. Its params are exactly what shapes the cell.


rule run:
    input:
        unpack(image_of),
    output:
        f"{RUNS}/{{cell}}/rep~{{rep}}/run.json",
    params:
        cell=cell_values,
        recipe=recipe,
    log:
        f"results/logs/run/{{cell}}/rep~{{rep}}.log",
    resources:
        measure=1,  # locally: one measuring job at a time
        sbatch=SBATCH,  # on Slurm: the node to itself
        runtime=run_minutes,
        attempt=attempt_number,
    group: REPETITION_GROUP  # on a cluster: with its collect, in one job
    priority: RUN_PRIORITY  # interleaved repetitions (config key interleave)
    script:
        "../scripts/run.py"
