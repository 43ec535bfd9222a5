"""A local campaign worker: one process per GPU, running its chunks and committing each chunk's
trials in one transaction. Started by the local executor; `inflight` says what it was doing."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tracer import jsonkeys
from tracer.campaign.grid import SprtBounds, load_campaign
from tracer.campaign.stats import Decision, sprt
from tracer.campaign.trials_db import Store
from tracer.campaign.trials import run_chunk


def sprt_decided(store: Store, bounds: SprtBounds, cell_id: int) -> bool:
    if not bounds.enabled:
        return False
    done, fails, _ = store.cell_counts(cell_id)
    return done > 0 and sprt(fails, done, bounds.p0, bounds.p1) is not Decision.CONTINUE


def die_with_parent() -> None:
    """A kill -9 of `campaign run` takes its workers with it (Linux prctl PR_SET_PDEATHSIG)."""
    import ctypes
    import os
    import signal

    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def main(argv: list[str] | None = None) -> int:
    die_with_parent()
    ap = argparse.ArgumentParser()
    ap.add_argument("store", type=Path)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--tasks", type=Path, required=True, help="JSON list of [cell_id, [trials]]")
    ap.add_argument("--gpu", default="cpu")
    ap.add_argument("--worker", required=True)
    args = ap.parse_args(argv)
    spec = load_campaign(args.profile)
    store = Store.open(args.store)
    cells = {c.cell_id: c.cell for c in store.cells()}
    for cell_id, trials in jsonkeys.loads(args.tasks.read_text()):
        todo = sorted(set(trials) - store.done_trials(cell_id))
        if not todo or sprt_decided(store, spec.sprt, cell_id):
            continue
        store.mark_inflight(args.worker, cell_id, todo, args.gpu)
        store.add_trials(run_chunk(spec, cell_id, cells[cell_id], todo, args.gpu, args.worker), args.worker)
    return 0


if __name__ == "__main__":
    sys.exit(main())
