#!/usr/bin/env python3
"""Measures planex's eager scheduler against the seed's wave barriers.

Runs `orchestrator planex run tasks.csv -y -c 4 --schedule eager|waves` on
seeded random DAGs of shell tasks that sleep 0.1-0.6 s, in fresh git
repositories, and prints each wall time against the lower bound
max(critical path, total work / 4) computed from the true sleep times, all
in the same run. Figures, not assertions: the makespan claim is also
measured on the scheduler itself by `perf-report` (makespan_eager_over_waves).

Without --verify the tasks only sleep and run unverified (`--no-commit`).
With --verify each task also writes its own file (scope: that file) and
runs verified (planex's default): measured, checked, committed, in a
worktree of its own (-c 4), landed by cherry-pick. The same DAGs then also
run unverified, and the overhead per task of worktree + landing is printed.
The same figures, from the library, are in `perf-report`
(`planex_verified_eager_over_waves`, `planex_verify_overhead_ms_per_task`).

Usage: scripts/planex-eager-vs-waves.py [--verify] [ORCHESTRATOR_BINARY] [DAGS]
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import time

HEADER = "id,title,description,test,acceptance_criteria,scope,hints,execution_directives,deps,context_from,wave"


def dag(rng, n):
    tasks = []
    for i in range(n):
        sleep = rng.randint(100, 600)
        deps = set()
        if i > 0:
            for _ in range(rng.randint(0, 3)):
                deps.add(i - min(rng.randint(1, 8), i))
        tasks.append((sleep, sorted(deps)))
    return tasks


def lower_bound(tasks, c):
    finish = []
    for sleep, deps in tasks:
        finish.append(max((finish[d] for d in deps), default=0) + sleep)
    return max(max(finish, default=0), -(-sum(s for s, _ in tasks) // c))


def csv(tasks, write):
    lines = [HEADER]
    for i, (sleep, deps) in enumerate(tasks):
        d = ";".join(f"T{x + 1}" for x in deps)
        if write:
            lines.append(f'T{i + 1},Sleep {sleep},Do Sleep {sleep},,,out/T{i + 1}.txt,,'
                         f'"sleep {sleep / 1000:.3f}; mkdir -p out; echo T{i + 1} > out/T{i + 1}.txt",{d},,')
        else:
            lines.append(f'T{i + 1},Sleep {sleep},Do Sleep {sleep},,,,,"sleep {sleep / 1000:.3f}",{d},,')
    return "\n".join(lines) + "\n"


def run(binary, text, mode, verify=False):
    with tempfile.TemporaryDirectory() as repo:
        env = dict(os.environ, GIT_AUTHOR_NAME="m", GIT_AUTHOR_EMAIL="m@example.invalid",
                   GIT_COMMITTER_NAME="m", GIT_COMMITTER_EMAIL="m@example.invalid")
        subprocess.run(["git", "init", "-q", "-b", "main", repo], check=True, env=env)
        with open(os.path.join(repo, "tasks.csv"), "w") as f:
            f.write(text)
        subprocess.run(["git", "-C", repo, "add", "-A"], check=True, env=env)
        subprocess.run(["git", "-C", repo, "commit", "-q", "-m", "tasks"], check=True, env=env)
        args = [binary, "planex", "run", "tasks.csv", "-y", "-c", "4", "--schedule", mode]
        if not verify:
            args.append("--no-commit")
        start = time.monotonic()
        out = subprocess.run(args, cwd=repo, env=env, capture_output=True, text=True)
        wall = time.monotonic() - start
        if out.returncode != 0:
            sys.exit(f"planex run --schedule {mode} exited {out.returncode}:\n{out.stdout}\n{out.stderr}")
        return wall


def main():
    argv = sys.argv[1:]
    verify = "--verify" in argv
    argv = [a for a in argv if a != "--verify"]
    binary = os.path.abspath(argv[0] if argv else "target/release/orchestrator")
    dags = int(argv[1]) if len(argv) > 1 else 2
    rng = random.Random(20261203)
    sums = [0.0, 0.0, 0.0]
    plain_sum, tasks_sum = 0.0, 0
    for _ in range(dags):
        tasks = dag(rng, rng.randint(30, 60))
        bound = lower_bound(tasks, 4) / 1000
        text = csv(tasks, verify)
        eager, waves = run(binary, text, "eager", verify), run(binary, text, "waves", verify)
        label = " --verify" if verify else ""
        print(f"{len(tasks)} tasks{label}: bound {bound:.2f} s, eager {eager:.2f} s ({eager / bound:.2f}x bound), "
              f"waves {waves:.2f} s ({waves / bound:.2f}x bound); eager/waves {eager / waves:.2f}",
              file=sys.stderr)
        if verify:
            plain = run(binary, text, "eager")
            plain_sum += plain
            tasks_sum += len(tasks)
            print(f"  unverified eager {plain:.2f} s", file=sys.stderr)
        for i, v in enumerate([bound, eager, waves]):
            sums[i] += v
    bound, eager, waves = sums
    report = {"eager_over_waves": round(eager / waves, 3),
              "eager_over_bound": round(eager / bound, 3),
              "waves_over_bound": round(waves / bound, 3)}
    if verify:
        # Wall time added per task by verification (worktree, measurement,
        # commit, landing), spread over 4 slots: x4 for the per-task cost.
        report["verify_overhead_ms_per_task"] = round((eager - plain_sum) * 4 / tasks_sum * 1000, 1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
