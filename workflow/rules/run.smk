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
        slurm_extra=SLURM_EXTRA,  # on Slurm: the node to itself
        runtime=run_minutes,
        attempt=attempt_number,
        **PARTITION,
    priority: RUN_PRIORITY  # interleaved repetitions (config key interleave)
    script:
        "../scripts/run.py"


# canary: the study's first cell again, between the repetitions (noise_control.canary, dbsweep/canary.py);
# the same job as run, in its own folder, in the place its priority gives it.
rule canary:
    input:
        unpack(image_of),
    output:
        f"{canary.ROOT}/{{cell}}/rep~{{rep}}/run.json",
    params:
        cell=cell_values,
        recipe=recipe,
    log:
        f"results/logs/canary/{{cell}}/rep~{{rep}}.log",
    resources:
        measure=1,
        slurm_extra=SLURM_EXTRA,
        runtime=run_minutes,
        attempt=attempt_number,
        **PARTITION,
    priority: canary_priority
    script:
        "../scripts/run.py"
