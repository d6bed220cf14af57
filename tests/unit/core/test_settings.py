"""The settings the model services share."""

from __future__ import annotations

import os

from groundwire_core.settings import ModelServiceSettings


def test_lanes_are_the_setting_else_one_per_thread_of_a_run_alone() -> None:
    assert ModelServiceSettings(model_lanes=3, intra_op_threads=2).lanes == 3
    assert ModelServiceSettings(model_lanes=1).lanes == 1
    # 0: as many one-thread runs as the threads one run alone would use
    assert ModelServiceSettings(model_lanes=0, intra_op_threads=2).lanes == 2
    assert ModelServiceSettings().lanes == len(os.sched_getaffinity(0))
