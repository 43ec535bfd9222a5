"""What is left of a campaign, in chunks: a cell's remaining trials in batches, interleaved across
cells so variants alternate, and dealt to workers so every variant runs on every GPU."""
from __future__ import annotations

from typing import NamedTuple

from tracer.campaign.grid import CampaignSpec
from tracer.campaign.trials_db import Store


class Chunk(NamedTuple):
    cell_id: int
    trials: list[int]


def plan_chunks(store: Store, spec: CampaignSpec) -> list[Chunk]:
    """Remaining trials in chunks of `batch`, interleaved across cells so variants alternate."""
    per_cell: list[list[Chunk]] = []
    for cell_id, _cell, target in store.cells():
        todo = sorted(set(range(target)) - store.done_trials(cell_id))
        per_cell.append([Chunk(cell_id, todo[i:i + spec.batch]) for i in range(0, len(todo), spec.batch)])
    out: list[Chunk] = []
    while any(per_cell):
        for chunks in per_cell:
            if chunks:
                out.append(chunks.pop(0))
    return out


def remaining_trials(store: Store, spec: CampaignSpec) -> int:
    return sum(len(c.trials) for c in plan_chunks(store, spec))


def assign(chunks: list[Chunk], n_cells: int, slots: list[str]) -> dict[str, list[Chunk]]:
    """Round r gives cell k's chunk to slot (k + r) mod slots: every variant runs on every GPU."""
    queues: dict[str, list[Chunk]] = {s: [] for s in slots}
    for j, chunk in enumerate(chunks):
        queues[slots[(j % max(n_cells, 1) + j // max(n_cells, 1)) % len(slots)]].append(chunk)
    return queues
