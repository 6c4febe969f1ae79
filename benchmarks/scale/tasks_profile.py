"""Tasks per round, profiled: one corpus built per task count and trained once per
``combine`` value on it (the benchmark's tasks stage builds a corpus per fit, through
``sparklda.api.fit``). Prints the median round, job, driver merge, the bytes and the
first round of one SCVB0 pass at K=100, minibatch 16,000, on the tasks stage's
generated corpus (draw it first with ``benchmarks/run.py --only tasks`` or
``sparklda generate``).

    PYTHONPATH=$PWD python benchmarks/scale/tasks_profile.py CORPUS_DIR 2,64 driver,executors
"""

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _med(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return float(np.median(vals)) if vals else float("nan")


def main() -> None:
    from benchmarks.lda_bench.cli import build_session
    from sparklda.corpus import build_corpus, from_vectors
    from sparklda.params import TrainParams
    from sparklda.training import train

    path, parts_list, combines = sys.argv[1], sys.argv[2], sys.argv[3]
    spark = build_session(None, "8g")
    src = from_vectors(spark.read.parquet(os.path.join(path, "corpus")), "features", "id")
    for parts in (int(x) for x in parts_list.split(",")):
        t = time.perf_counter()
        corpus = build_corpus(
            src, minibatch_size=16000, seed=0, parts_per_slice=parts, dtype=np.dtype("float32")
        )
        print(f"tasks={parts} corpus built in {time.perf_counter() - t:.1f} s", flush=True)
        for combine in combines.split(","):
            params = TrainParams(
                algorithm="scvb0",
                k=100,
                alpha=0.1,
                passes=1,
                minibatch_size=16000,
                parts_per_slice=parts,
                combine=combine,
                seed=0,
            )
            res = train(corpus, params, None)
            rr = res.rounds[1:]
            print(
                f"tasks={parts} combine={combine} rounds={len(res.rounds)} "
                f"round={_med(rr, 'round_s'):.3f} job={_med(rr, 'job_s'):.3f} "
                f"merge={_med(rr, 'merge_s'):.4f} "
                f"kernel_max={_med(rr, 'task_kernel_max_s'):.3f} "
                f"driver={_med(rr, 'driver_bytes') / 1e6:.1f}MB "
                f"merged={_med(rr, 'merged_bytes') / 1e6:.1f}MB "
                f"shipped={_med(rr, 'shipped_bytes') / 1e6:.1f}MB "
                f"first={res.rounds[0]['round_s']:.2f}",
                flush=True,
            )
        corpus.unpersist()
    print("load average:", " ".join(f"{x:.1f}" for x in os.getloadavg()))
    spark.stop()


if __name__ == "__main__":
    main()
