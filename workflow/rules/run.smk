# run: one measured repetition of one cell. Its params are exactly what shapes the cell.


rule run:
    input:
        unpack(image_of),
    output:
        f"{RUNS}/{{cell}}/rep~{{rep}}/run.json",
    log:
        f"results/logs/run/{{cell}}/rep~{{rep}}.log",
    priority: RUN_PRIORITY  # interleaved repetitions (config key interleave)
    group:
        repetition_group  # on a cluster: with its collect, in one job
    resources:
        measure=1,  # locally: one measuring job at a time
        sbatch=SBATCH,  # on Slurm: the node to itself
        runtime=run_minutes,
        attempt=attempt_number,
    params:
        cell=cell_values,
        recipe=recipe,
    script:
        "../scripts/run.py"


# calibrate: the host's closed-loop throughput for cells with `rate: N%` (dbsweep/calibration.py), once per
# host and calibration; the run rule of each such cell makes its rate from it.
rule calibrate:
    input:
        unpack(calibration_input),
    output:
        "resources/calibration/{host}/{calibration}.json",
    log:
        "results/logs/calibrate/{host}/{calibration}.log",
    priority: STUDY.priority(0)  # before the runs that wait for it
    resources:
        measure=1,
        sbatch=calibration_sbatch,
        runtime=30,
        attempt=attempt_number,
    params:
        recipe=calibration_recipe,
    script:
        "../scripts/calibrate.py"


# canary: the study's first cell again, between the repetitions (noise_control.canary, dbsweep/canary.py);
# the same job as run, in its own folder, in the place its priority gives it.
rule canary:
    input:
        unpack(image_of),
    output:
        f"{canary.ROOT}/{{cell}}/rep~{{rep}}/run.json",
    log:
        f"results/logs/canary/{{cell}}/rep~{{rep}}.log",
    priority: canary_priority
    resources:
        measure=1,
        sbatch=SBATCH,
        runtime=run_minutes,
        attempt=attempt_number,
    params:
        cell=cell_values,
        recipe=recipe,
    script:
        "../scripts/run.py"
