"""Per-job tables as a policy capability (issue 24): ``Policy.job_tables`` and
``Policy.bind_tables(TableBinding)`` replace the binders that looked parameters up by name.

Expected values are derived by hand from the ids given; the round-loop tests
(test_packing, test_placement_sensitivity, test_sia, test_online_kinds) check that simulations
through the capability are unchanged.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hetsched as hs
from hetsched.errors import ValidationError
from hetsched.formulations.base import registered_policies
from hetsched.formulations.spaces.packing import Packing
from hetsched.formulations.spaces.placement_sensitivity import PlacementSensitivity
from hetsched.formulations.tables import WORKLOAD, TableBinding, job_numbers
from hetsched.inputs.throughputs import PairThroughputs

SRC = Path(hs.__file__).resolve().parent
IDS = np.array(["a", "b", "c"], dtype=object)  # job number j has id IDS[j]


def _packing(keys: dict, *, names_jobs: bool = False) -> Packing:
    index = np.array([[0, 1]])
    table = np.full((1, 2, 2), 0.6)  # one key pair, two GPU types, both members at 0.6
    return Packing(PairThroughputs(index, table), gpu_types=["v100", "k80"], keys=keys, names_jobs=names_jobs)


def test_policies_without_tables_bind_to_themselves():
    for name, cls in registered_policies().items():
        pol = cls()
        if not pol.job_tables:
            assert pol.bind_tables(TableBinding(ids=IDS)) is pol, name
        assert pol.bound_tables() == (), name  # every table parameter defaults to None
        assert set(pol.job_tables) <= set(pol.params()) | {"packing", "placement_sensitivity"}, name


def test_declared_tables():
    assert hs.policies.MaxMinFairness.job_tables == ("packing", "placement_sensitivity")
    assert hs.policies.Sia.job_tables == ("goodput",)
    assert hs.policies.Fifo.job_tables == ()


def test_job_numbers_by_hand():
    # "c" is job 2, "a" job 0; "zz" (1st unknown, at position 1) -> -1 - 1 = -2
    assert job_numbers(pd.Index(["c", "zz", "a"]), IDS).tolist() == [2, -2, 0]


def test_packing_keys_rekeyed_to_numbers():
    pol = hs.policies.MaxMinFairness(packing=_packing({"c": 1, "a": 0, "b": 0}))
    bound = pol.bind_tables(TableBinding(ids=IDS))
    assert bound is not pol and pol.packing.keys.index.tolist() == ["c", "a", "b"]  # the original is unchanged
    assert bound.packing.keys.to_dict() == {2: 1, 0: 0, 1: 0}
    assert bound.packing.names_jobs is False


def test_named_pairs_give_unnamed_jobs_fresh_keys():
    # keys are the job ids themselves: a and c name keys 0 and 1; b is named nowhere and gets
    # key max + 1 = 2, so it can be solved without a pair
    pk = _packing({"a": 0, "c": 1}, names_jobs=True)
    bound = hs.policies.MaxMinFairness(packing=pk).bind_tables(TableBinding(ids=IDS))
    assert bound.packing.keys.sort_index().to_dict() == {0: 0, 1: 2, 2: 1}


def test_placement_sensitivity_rows_rekeyed():
    frame = pd.DataFrame({"v100": [1.0, 2.0], "k80": [0.5, 0.25]}, index=["b", "a"])
    bound = hs.policies.MinMakespan(placement_sensitivity=PlacementSensitivity(frame)).bind_tables(
        TableBinding(ids=IDS))
    got = bound.placement_sensitivity.unconsolidated
    assert got.index.tolist() == [1, 0] and got.loc[0, "v100"] == 2.0 and got.loc[1, "k80"] == 0.5


def test_sia_goodput_rows_rekeyed():
    cols = pd.MultiIndex.from_tuples([("v100", 1), ("v100", 2)])
    table = pd.DataFrame([[1.0, 1.8], [2.0, 3.0]], index=["c", "b"], columns=cols)
    bound = hs.policies.Sia(goodput=table).bind_tables(TableBinding(ids=IDS))
    assert bound.goodput.index.tolist() == [2, 1]
    assert bound.goodput.loc[1, ("v100", 2)] == 3.0
    assert hs.policies.Sia().bind_tables(TableBinding(ids=IDS)).goodput is None
    assert hs.policies.Sia(goodput=table).bind_tables(TableBinding()).goodput is table  # no ids: as given


def test_workload_table_without_catalogue_is_an_error():
    pol = hs.policies.MaxMinFairness(packing=WORKLOAD)
    assert pol.workload_tables() == ("packing",)
    with pytest.raises(ValidationError, match=r"`packing='workload'` needs a workload sampled from a throughput"):
        pol.bind_tables(TableBinding(ids=IDS))


def test_workload_table_from_catalogue_and_from_build():
    cat = hs.generate_catalogue(gpu_types=["v100", "k80"], n_job_types=3, seed=0, pairs=True)
    rows = np.array([2, 0, 2])
    bound = hs.policies.MaxMinFairness(packing=WORKLOAD).bind_tables(
        TableBinding(ids=IDS, catalogue=cat, catalogue_rows=rows))
    # job number j has the key of its catalogue row
    assert bound.packing.keys.to_dict() == {0: 2, 1: 0, 2: 2}
    asked = []
    made = _packing({0: 0, 1: 1, 2: 0})

    def build(name):
        asked.append(name)
        return made

    bound = hs.policies.MaxMinFairness(packing=WORKLOAD).bind_tables(TableBinding(ids=IDS, build=build))
    assert asked == ["packing"] and bound.packing is made  # built tables are keyed by number already


def test_drivers_do_not_look_tables_up_by_name():
    """No `getattr(policy, "packing")`-style probe is left in the drivers: they ask the capability."""
    names = {"packing", "placement_sensitivity", "goodput"}
    found = []
    for path in [*(SRC / "rounds").glob("*.py"), *(SRC / "sim").glob("*.py"), *(SRC / "online").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in names):
                found.append(f"{path.name}:{node.lineno}")
    assert found == []
