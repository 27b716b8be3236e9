"""Fitting the engine profiles on the calibration table (closed-form steady state, grid search).

Per engine x hardware, MFU, MBU and the per-iteration overhead minimizing the squared log error of
throughput per GPU and TPOT of `steady_state` over a set of rows. `held_out` fits each row's
constants on the rows of its group with another scenario (ISL:OSL), so that no row is predicted
from its own figures: what `agentx sim calibrate` reports. `tools/fit_profiles.py` prints the
profiles fitted on every row of each group, the ones shipped in presets.toml.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

from agentx.engine.calibration import Row, row_engine
from agentx.engine.steady import Steady, steady_state
from agentx.engine.timing import Roofline

MFU = tuple(x / 100 for x in range(10, 96, 5))
MBU = tuple(x / 100 for x in range(30, 101, 5))
OVERHEAD_MS = (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30)
Params = tuple[float, float, float]  # mfu, mbu, overhead_ms


def predict(roof: Roofline, row: Row, params: Params) -> Steady:
    roof.mfu, roof.mbu, roof.overhead_s = params[0], params[1], params[2] / 1000
    mean = (1 + row.range_ratio) / 2  # mean of uniform [R L, L], over L
    return steady_state(roof, row.isl * mean, row.osl * mean, row.concurrency)


def loss(roofs: dict, rows: list[Row], params: Params) -> float:
    total = 0.0
    for row in rows:
        s = predict(roofs[row.id], row, params)
        total += math.log(s.tok_s_per_gpu / row.tok_s_per_gpu) ** 2
        if row.tpot_ms_p50:
            total += math.log(s.iteration_s * 1000 / row.tpot_ms_p50) ** 2
    return total


def fit(roofs: dict, rows: list[Row]) -> Params:
    return min(itertools.product(MFU, MBU, OVERHEAD_MS), key=lambda p: loss(roofs, rows, p))


def rooflines(rows: list[Row]) -> dict:
    return {r.id: Roofline(row_engine(r)) for r in rows}


def groups(rows: list[Row]) -> dict:
    out = defaultdict(list)
    for r in rows:
        out[(r.engine, r.hardware)].append(r)
    return out


def held_out(rows: list[Row]) -> dict[str, tuple[Params, list[str]]]:
    """Per row: constants fitted on its group's rows of other scenarios, and those rows' ids."""
    roofs, out = rooflines(rows), {}
    for members in groups(rows).values():
        for scenario in {r.scenario for r in members}:
            train = [r for r in members if r.scenario != scenario]
            if not train:
                continue
            params = fit(roofs, train)
            for r in members:
                if r.scenario == scenario:
                    out[r.id] = (params, [t.id for t in train])
    return out
