"""Sia's published profiles (hetsched.inputs.profiles) and workloads (hetsched.inputs.traces.sia).

Synthetic fixtures are written to tmp_path with hand-derived expectations; the real data
(Sia's artifact, ``../shared/data/sia``) is only read where :func:`sia_data_path` finds it,
else those tests skip. Nothing of the real data is copied here.

The toy model (hand-derived numbers used below):

* machine ``aws`` (4 GPUs per node): placements ``1`` (local_bsz 10/20/40: step 1/2/3, sync
  0.1/0.2/0.3), ``2`` (10/20: 1.5/2.5, 0.5/0.7), ``4``, ``24``, ``44`` and scalability rows at
  (3 nodes, 12 replicas) and (4, 16);
* machine ``rtx`` (8 GPUs per node): every row affine, step = 0.2 n + 0.1 k + 0.01 b and
  sync = 0.1 n + 0.02 k, so any linear interpolation inside the hull gives those formulas;
* validation runs at total batch 100 and 300, three epochs each.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hetsched.errors import DataNotFoundError, ValidationError
from hetsched.inputs.profiles import (
    SIA_DATA_ENV,
    SIA_MACHINES,
    MachineProfile,
    ModelProfile,
    load_model_profile,
    load_sia_profiles,
    sia_data_path,
    sia_model_names,
)
from hetsched.inputs.traces.sia import AdaptiveJobTable, read_sia_workload

TOY_MACHINES = {"t4": "aws", "rtx": "rtx"}

_AWS_PLACEMENTS = [  # placement, local_bsz, step_time, sync_time
    ("1", 10, 1.0, 0.1), ("1", 20, 2.0, 0.2), ("1", 40, 3.0, 0.3),
    ("2", 10, 1.5, 0.5), ("2", 20, 2.5, 0.7),
    ("4", 10, 2.0, 1.0), ("4", 20, 3.0, 1.2),
    ("24", 10, 3.0, 2.0), ("24", 20, 4.0, 2.2),
    ("44", 10, 4.0, 3.0), ("44", 20, 5.0, 3.2),
]
_AWS_SCALABILITY = [(10, 5.0, 4.0, 3, 12), (20, 6.0, 4.5, 3, 12), (10, 6.0, 5.0, 4, 16), (20, 7.0, 5.5, 4, 16)]


def _affine(n: int, k: int, b: float) -> tuple[float, float]:
    return 0.2 * n + 0.1 * k + 0.01 * b, 0.1 * n + 0.02 * k


def _write(path: Path, header: str, rows: list[tuple]) -> Path:
    path.write_text(header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return path


def _toy_folder(root: Path, model: str = "toy") -> Path:
    d = root / "profiles" / model
    d.mkdir(parents=True)
    _write(d / "placements-aws.csv", "placement,local_bsz,step_time,sync_time", _AWS_PLACEMENTS)
    _write(d / "scalability-aws.csv", "local_bsz,step_time,sync_time,num_nodes,num_replicas", _AWS_SCALABILITY)
    rtx_p = []
    for p in ("1", "2", "4", "8", "88"):
        n, k = len(p), sum(map(int, p))
        for b in (10, 30):
            rtx_p.append((p, b, *_affine(n, k, b)))
    rtx_s = [(b, *_affine(n, k, b), n, k) for n, k in ((3, 24), (4, 32)) for b in (10, 30)]
    _write(d / "placements-rtx.csv", "placement,local_bsz,step_time,sync_time", rtx_p)
    _write(d / "scalability-rtx.csv", "local_bsz,step_time,sync_time,num_nodes,num_replicas", rtx_s)
    _write(d / "validation-100.csv", "progress,iteration,metric,grad_sqr,grad_var",
           [(100.0, 99, 0.1, 4.0, 10.0), (210.0, 209, 0.2, 2.0, 8.0), (330.0, 329, 0.3, 1.0, 6.0)])
    _write(d / "validation-300.csv", "progress,iteration,metric,grad_sqr,grad_var",
           [(95.0, 31, 0.1, 2.0, 20.0), (215.0, 71, 0.2, 1.0, 16.0), (320.0, 106, 0.3, 0.5, 12.0)])
    return d


@pytest.fixture
def toy_root(tmp_path: Path) -> Path:
    _toy_folder(tmp_path)
    return tmp_path


@pytest.fixture
def toy(toy_root: Path) -> ModelProfile:
    return load_model_profile("toy", path=toy_root, machines=TOY_MACHINES)


# ------------------------------------------------------------------------------ synthetic: loading
def test_toy_loads_with_constants(toy: ModelProfile) -> None:
    assert set(toy.machines) == {"t4", "rtx"}
    aws, rtx = toy.machines["t4"], toy.machines["rtx"]
    assert isinstance(aws, MachineProfile)
    assert (aws.model, aws.machine, aws.gpus_per_node) == ("toy", "aws", 4)
    assert (aws.min_local_bsz, aws.max_local_bsz) == (10, 40)
    assert (rtx.machine, rtx.gpus_per_node, rtx.min_local_bsz, rtx.max_local_bsz) == ("rtx", 8, 10, 30)
    assert list(aws.placements.columns) == ["placement", "local_bsz", "step_time", "sync_time", "num_nodes",
                                            "num_replicas"]
    row = aws.placements[aws.placements.placement == "24"].iloc[0]
    assert (row.num_nodes, row.num_replicas) == (2, 6)
    assert sorted(toy.validation) == [100, 300]
    # "toy" is in none of the artifact's tables: max_epochs = shortest run, restart 30 s, 1/1.2
    assert (toy.init_batch_size, toy.max_batch_size, toy.max_epochs) == (100, 300, 3)
    assert toy.restart_seconds == 30.0 and toy.calibration == pytest.approx(1 / 1.2)


def test_samples(toy: ModelProfile) -> None:
    aws = toy.machines["t4"]
    one = aws.single_gpu_samples()
    assert one.local_bsz.tolist() == [10, 20, 40] and one.step_time.tolist() == [1.0, 2.0, 3.0]
    all_ = aws.samples()
    assert list(all_.columns) == ["num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"]
    assert len(all_) == len(_AWS_PLACEMENTS) + len(_AWS_SCALABILITY)
    assert len(aws.samples(max_nodes=1)) == 7  # placements 1, 2, 4
    assert len(aws.samples(max_replicas=2)) == 5
    assert len(aws.samples(max_nodes=3, max_replicas=12)) == 15 - 2


# ------------------------------------------------------------------------------ synthetic: times
def test_placement_of() -> None:
    m = load_placeholder_machine(4)
    assert m.placement_of(1, 3) == (3,)
    assert m.placement_of(2, 6) == (4, 2)  # compact: full nodes first
    assert m.placement_of(2, 5) == (4, 1)
    assert m.placement_of(3, 6) == (2, 2, 2)  # spread: as even as possible
    assert m.placement_of(3, 5) == (2, 2, 1)
    assert m.placement_of(2, 8) == (4, 4)
    for n, k in ((2, 9), (3, 2), (0, 1)):
        with pytest.raises(ValidationError, match="cannot be placed"):
            m.placement_of(n, k)


def load_placeholder_machine(r: int) -> MachineProfile:
    import pandas as pd

    p = pd.DataFrame({"placement": ["1"], "local_bsz": [1], "step_time": [1.0], "sync_time": [0.5],
                      "num_nodes": [1], "num_replicas": [1]})
    s = pd.DataFrame(columns=["num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"])
    return MachineProfile(model="x", machine="m", gpus_per_node=r, placements=p, scalability=s,
                          min_local_bsz=1, max_local_bsz=1)


def test_times_interpolate_in_local_bsz(toy: ModelProfile) -> None:
    aws = toy.machines["t4"]
    step, sync = aws.times(1, 1, 15)  # midpoint of (10: 1.0, 0.1) and (20: 2.0, 0.2)
    assert float(step) == pytest.approx(1.5) and float(sync) == pytest.approx(0.15)
    step, sync = aws.times(1, 1, 30)  # midpoint of 20 and 40
    assert float(step) == pytest.approx(2.5) and float(sync) == pytest.approx(0.25)
    # measured points come back exactly, vectorised and broadcast
    step, sync = aws.times(np.array([1, 1, 1]), 1, np.array([10, 20, 40]))
    assert step.tolist() == [1.0, 2.0, 3.0] and sync.tolist() == [0.1, 0.2, 0.3]
    step, sync = aws.times([[1], [1]], [1, 2], 20)
    assert step.shape == (2, 2) and step.tolist() == [[2.0, 2.5], [2.0, 2.5]]


def test_placement_is_normalised(toy: ModelProfile) -> None:
    aws = toy.machines["t4"]
    # (nodes 2, replicas 6) on 4-GPU nodes is (4, 2); its smallest rotation "24" is measured
    step, sync = aws.times(2, 6, 15)
    assert float(step) == pytest.approx(3.5) and float(sync) == pytest.approx(2.1)
    for spelled in ((4, 2), (2, 4), "42", "24", (0, 4, 0, 2)):
        assert aws.placement_times(spelled, 15) == pytest.approx((3.5, 2.1))


def test_exact_placement_beats_3d(toy: ModelProfile) -> None:
    # placement "2" is off the line the other rows follow; its own rows are used
    aws = toy.machines["t4"]
    assert aws.placement_times("2", 15) == pytest.approx((2.0, 0.6))


def test_3d_interpolation_affine(toy: ModelProfile) -> None:
    rtx = toy.machines["rtx"]
    # (2 nodes, 12 replicas) on 8-GPU nodes is (8, 4): "48", not measured -> 3-D; the data
    # are affine, so the value is the formula's
    step, sync = rtx.times(2, 12, 20)
    exp = _affine(2, 12, 20)
    assert float(step) == pytest.approx(exp[0], rel=1e-9) and float(sync) == pytest.approx(exp[1], rel=1e-9)
    # beyond 16 nodes the node count is capped (not reached here); in the hull up to 30
    assert rtx.max_atomic_bsz(2, 12) == 30
    assert rtx.max_atomic_bsz(1, 2) == 30
    assert toy.machines["t4"].max_atomic_bsz(1, 1) == 40
    assert toy.machines["t4"].max_atomic_bsz(1, 2) == 20


def test_batch_outside_profiled_range(toy: ModelProfile) -> None:
    aws = toy.machines["t4"]
    with pytest.raises(ValidationError, match=r"'toy'.*'aws'.*placement '1'.*local batch size 5\b.*\[10, 40\]"):
        aws.times(1, 1, 5)
    with pytest.raises(ValidationError, match=r"placement '2'.*local batch size 25\b"):
        aws.times(1, 2, 25)
    # (2, 4) spreads as (2, 2): "22" is not measured and (2, 4) is outside the hull
    with pytest.raises(ValidationError, match=r"'toy'.*'aws'.*'22'.*cannot be interpolated"):
        aws.times(2, 4, 10)
    with pytest.raises(ValidationError, match="atomic_bsz"):
        aws.times(1, 1, 0)
    with pytest.raises(ValidationError, match="nodes"):
        aws.times(1.5, 1, 10)


# ------------------------------------------------------------------------------ synthetic: epochs, statistics, rates
def test_epochs(toy: ModelProfile) -> None:
    # epoch starts: 0, then min over runs of progress[e-1]: min(100, 95), min(210, 215), min(330, 320)
    assert toy.epoch_progress(0) == 0.0
    assert toy.epoch_progress(1) == 95.0 and toy.epoch_progress(2) == 210.0 and toy.epoch_progress(3) == 320.0
    assert toy.epoch_progress(np.array([0, 3])).tolist() == [0.0, 320.0]
    assert toy.completion_progress == 320.0
    got = toy.epoch_of([0, 94.9, 95, 209, 210, 319, 320, 1e9])
    assert got.tolist() == [0, 0, 1, 1, 2, 2, 2, 2]
    with pytest.raises(ValidationError, match="epoch"):
        toy.epoch_progress(4)
    with pytest.raises(ValidationError, match="progress"):
        toy.epoch_of(-1.0)


def test_grad_stats(toy: ModelProfile) -> None:
    sqr, var = toy.grad_stats(200, 1)  # halfway between 100 (2, 8) and 300 (1, 16)
    assert float(sqr) == pytest.approx(1.5) and float(var) == pytest.approx(12.0)
    sqr, var = toy.grad_stats(150, 0)  # a quarter of the way from 100 (4, 10) to 300 (2, 20)
    assert float(sqr) == pytest.approx(0.75 * 4 + 0.25 * 2) and float(var) == pytest.approx(0.75 * 10 + 0.25 * 20)
    sqr, var = toy.grad_stats([50, 100, 300, 1000], 2)  # clipped to [100, 300]; exact at the runs
    assert sqr.tolist() == [1.0, 1.0, 0.5, 0.5] and var.tolist() == [6.0, 6.0, 12.0, 12.0]
    with pytest.raises(ValidationError, match="epoch"):
        toy.grad_stats(100, 3)


def test_progress_rate_by_hand(toy: ModelProfile) -> None:
    # t4 (aws), 1 node, 2 replicas, 20 per GPU, 4 accumulation steps, epoch 1:
    # M = 2*20*5 = 200, scale = 2; (sqr, var) = (1.5, 12); gain = 13.5 / (6 + 1.5) = 1.8;
    # (step, sync) = (2.5, 0.7); T = 2.5 + 4 * 1.8 = 9.7; rate = 1.8 / 9.7 / 1.2
    rate = toy.progress_rate("t4", 1, 2, 20, 4, 1)
    assert float(rate) == pytest.approx(1.8 / 9.7 / 1.2)
    assert float(toy.throughput("t4", 1, 2, 20, 4)) == pytest.approx(200 / 9.7 / 1.2)
    # 1 node, 4 replicas, 20 per GPU, no accumulation, epoch 0: M = 80 < 100, so the statistics
    # are the batch-100 run's (4, 10) while scale = 0.8; T = step of placement "4" at 20 = 3.0
    sqr, var = 4.0, 10.0
    gain = (var + sqr) / (var / 0.8 + sqr)
    assert float(toy.progress_rate("t4", 1, 4, 20, 0, 0)) == pytest.approx(gain / 3.0 / 1.2)
    # vectorised
    r = toy.progress_rate("t4", [1, 1], [2, 2], [20, 20], [4, 0], [1, 1])
    assert r.shape == (2,) and r[0] == pytest.approx(1.8 / 9.7 / 1.2)
    with pytest.raises(ValidationError, match=r"gpu_type.*\['rtx', 't4'\].*'a100'"):
        toy.progress_rate("a100", 1, 1, 10, 0, 0)


# ------------------------------------------------------------------------------ synthetic: bad files
def test_missing_column(toy_root: Path) -> None:
    p = toy_root / "profiles" / "toy" / "placements-aws.csv"
    _write(p, "placement,local_bsz,step_time", [r[:3] for r in _AWS_PLACEMENTS])
    with pytest.raises(ValidationError, match=r"placements-aws\.csv.*\['sync_time'\]"):
        load_model_profile("toy", path=toy_root, machines=TOY_MACHINES)


def test_negative_step_time(toy_root: Path) -> None:
    rows = list(_AWS_PLACEMENTS)
    rows[1] = ("1", 20, -2.0, 0.2)
    _write(toy_root / "profiles" / "toy" / "placements-aws.csv", "placement,local_bsz,step_time,sync_time", rows)
    with pytest.raises(ValidationError, match=r"placements-aws\.csv: line 3: column `step_time`.*'-2\.0'"):
        load_model_profile("toy", path=toy_root, machines=TOY_MACHINES)


def test_nan_sync_time_in_scalability(toy_root: Path) -> None:
    rows = list(_AWS_SCALABILITY)
    rows[2] = (10, 6.0, "nan", 4, 16)
    _write(toy_root / "profiles" / "toy" / "scalability-aws.csv",
           "local_bsz,step_time,sync_time,num_nodes,num_replicas", rows)
    with pytest.raises(ValidationError, match=r"scalability-aws\.csv: line 4: column `sync_time`.*'nan'"):
        load_model_profile("toy", path=toy_root, machines=TOY_MACHINES)


def test_bad_validation_files(toy_root: Path) -> None:
    d = toy_root / "profiles" / "toy"
    (d / "validation-big.csv").write_text("progress,iteration,metric,grad_sqr,grad_var\n1,1,1,1,1\n")
    with pytest.raises(ValidationError, match=r"validation-big\.csv.*positive integer"):
        load_model_profile("toy", path=toy_root, machines=TOY_MACHINES)
    (d / "validation-big.csv").unlink()
    _write(d / "validation-300.csv", "progress,iteration,metric,grad_var", [(95.0, 31, 0.1, 20.0)])
    with pytest.raises(ValidationError, match=r"validation-300\.csv.*\['grad_sqr'\]"):
        load_model_profile("toy", path=toy_root, machines=TOY_MACHINES)


def test_unknown_model_and_machine(toy_root: Path) -> None:
    with pytest.raises(ValidationError, match=r"\['toy'\].*'nope'"):
        load_sia_profiles(toy_root, models=["nope"], machines=TOY_MACHINES)
    with pytest.raises(ValidationError, match=r"'v100'.*'azure'.*placements-azure\.csv.*\['aws', 'rtx'\]"):
        load_model_profile("toy", path=toy_root, machines={"v100": "azure"})
    # default models: the folders with every requested machine
    assert sia_model_names(toy_root, machines=TOY_MACHINES) == ["toy"]
    assert sia_model_names(toy_root) == []  # no dgx-ext profile
    assert set(load_sia_profiles(toy_root, machines=TOY_MACHINES)) == {"toy"}


def test_data_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(DataNotFoundError, match="absent"):
        sia_data_path(tmp_path / "absent")
    _toy_folder(tmp_path)
    assert sia_data_path(tmp_path) == tmp_path
    monkeypatch.setenv(SIA_DATA_ENV, str(tmp_path))
    assert sia_data_path() == tmp_path
    monkeypatch.setenv(SIA_DATA_ENV, str(tmp_path / "elsewhere"))
    try:
        found = sia_data_path()  # the checkout's copy, when there is one
    except DataNotFoundError as exc:
        assert "elsewhere" in str(exc) and SIA_DATA_ENV in str(exc)
    else:
        assert found != tmp_path


# ------------------------------------------------------------------------------ synthetic: workloads
_WL_HEADER = "name,time,application,num_replicas,batch_size"


def _wl(tmp_path: Path, body: str, name: str = "workload.csv") -> Path:
    p = tmp_path / name
    p.write_text(body)
    return p


def test_workload_reads_and_sorts(tmp_path: Path) -> None:
    p = _wl(tmp_path, f"{_WL_HEADER}\nb,20,toy,4,128\na,10.5,toy,2,64\nc,20,other,1,32\n")
    t = read_sia_workload(p)
    assert isinstance(t, AdaptiveJobTable) and t.n_jobs == 3 and t.source == str(p)
    assert list(t.frame.columns) == ["name", "arrival", "model", "num_replicas", "batch_size"]
    assert t.frame.name.tolist() == ["a", "b", "c"]  # by arrival, ties in file order
    assert t.frame.arrival.tolist() == [10.5, 20.0, 20.0]
    assert t.frame.num_replicas.dtype == np.int64 and t.frame.batch_size.tolist() == [64, 128, 32]
    assert t.models == ("other", "toy")


@pytest.mark.parametrize("body, match", [
    ("", r"workload\.csv: the file is empty"),
    (f"{_WL_HEADER}\n", r"workload\.csv: has a header but no jobs"),
    ("name,time,application,batch_size\na,1,toy,4\n", r"line 1: .*\['num_replicas'\]"),
    (f"{_WL_HEADER}\na,1,toy,2,64\nb,2,toy,,64\n", r"workload\.csv: line 3: job 'b': column `num_replicas`.*''"),
    (f"{_WL_HEADER}\na,1,toy,nan,64\n", r"line 2: job 'a': column `num_replicas`.*'nan'"),
    (f"{_WL_HEADER}\na,1,toy,-2,64\n", r"line 2: job 'a': column `num_replicas`.*'-2'"),
    (f"{_WL_HEADER}\na,1,toy,2,6.5\n", r"line 2: job 'a': column `batch_size`.*'6\.5'"),
    (f"{_WL_HEADER}\na,-1,toy,2,64\n", r"line 2: job 'a': column `time`.*'-1'"),
    (f"{_WL_HEADER}\na,NaN,toy,2,64\n", r"line 2: job 'a': column `time`.*'NaN'"),
    (f"{_WL_HEADER}\na,1,toy,2,64\na,2,toy,2,64\n", r"line 3: job name 'a' is a duplicate \(first on line 2\)"),
    (f"{_WL_HEADER}\na,1,toy,2\n", r"line 2: has 4 cells"),
])
def test_workload_errors(tmp_path: Path, body: str, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        read_sia_workload(_wl(tmp_path, body))


def test_workload_unknown_model(tmp_path: Path) -> None:
    p = _wl(tmp_path, f"{_WL_HEADER}\na,1,toy,2,64\nb,2,gpt9,2,64\n")
    with pytest.raises(ValidationError, match=r"line 3: job 'b' uses model 'gpt9'.*\['cifar10', 'toy'\]"):
        read_sia_workload(p, models={"toy", "cifar10"})
    assert read_sia_workload(p, models=["toy", "gpt9"]).n_jobs == 2
    with pytest.raises(ValidationError, match="models"):
        read_sia_workload(p, models="toy")
    with pytest.raises(ValidationError, match="existing local file"):
        read_sia_workload(tmp_path / "absent.csv")


# ------------------------------------------------------------------------------ real data (fixture sia_root: conftest.py)


@pytest.fixture(scope="module")
def real(sia_root: Path) -> dict[str, ModelProfile]:
    return load_sia_profiles(sia_root)


def _rotation_key(counts: tuple[int, ...]) -> str:
    """The smallest rotation of per-node counts as digits (the tables' spelling)."""
    return min("".join(map(str, counts[i:] + counts[:i])) for i in range(len(counts)))


REAL_MODELS = ["bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"]


def test_real_models_load(real: dict[str, ModelProfile], sia_root: Path) -> None:
    assert sorted(real) == REAL_MODELS
    for m in real.values():
        assert set(m.machines) == set(SIA_MACHINES)
        assert [m.machines[t].gpus_per_node for t in ("t4", "rtx", "a100")] == [4, 8, 8]
        assert m.completion_progress > 0 and len(m.validation) >= 6
    c = real["cifar10"]
    assert (c.init_batch_size, c.max_batch_size, c.max_epochs, c.restart_seconds) == (128, 4096, 100, 50.0)
    assert c.calibration == pytest.approx(1 / 1.8) and real["bert"].calibration == pytest.approx(1 / 1.2)
    # gpt_pmp: no T4 profile (an explicit error), loads on rtx and a100
    with pytest.raises(ValidationError, match=r"'gpt_pmp'.*'t4'.*placements-aws\.csv"):
        load_model_profile("gpt_pmp", path=sia_root)
    g = load_model_profile("gpt_pmp", path=sia_root, machines={"rtx": "rtx", "a100": "dgx-ext"})
    assert g.max_epochs == 2 and g.init_batch_size == 12


def test_real_times_reproduce_tables(real: dict[str, ModelProfile]) -> None:
    for m in real.values():
        for t, mp in m.machines.items():
            pl = mp.placements
            got = np.array([mp.placement_times(p, b) for p, b in zip(pl.placement, pl.local_bsz)])
            assert np.array_equal(got[:, 0], pl.step_time.to_numpy()), (m.model, t)
            assert np.array_equal(got[:, 1], pl.sync_time.to_numpy()), (m.model, t)
            # rows whose placement is the layout hetsched assumes for (nodes, replicas)
            canon = np.array([_rotation_key(mp.placement_of(n, k)) == p for p, n, k in
                              zip(pl.placement, pl.num_nodes, pl.num_replicas)])
            sub = pl[canon]
            assert len(sub) >= len(mp.single_gpu_samples())
            step, sync = mp.times(sub.num_nodes.to_numpy(), sub.num_replicas.to_numpy(), sub.local_bsz.to_numpy())
            assert np.array_equal(step, sub.step_time.to_numpy()) and np.array_equal(sync, sub.sync_time.to_numpy())


def test_real_physical_sanity(real: dict[str, ModelProfile]) -> None:
    c = real["cifar10"]
    for b in (32, 128, 512, 1024):
        t4 = float(c.progress_rate("t4", 1, 1, b, 0, 0))
        a100 = float(c.progress_rate("a100", 1, 1, b, 0, 0))
        assert math.isfinite(t4) and a100 > t4 > 0, b
    assert float(c.throughput("a100", 1, 1, 128, 0)) > float(c.throughput("t4", 1, 1, 128, 0))
    # more GPUs on one node: more examples per second for cifar10 at a fixed per-GPU batch
    assert float(c.throughput("a100", 1, 8, 128, 0)) > float(c.throughput("a100", 1, 1, 128, 0))


@pytest.mark.parametrize("trace, count, rows", [("philly", 8, 160), ("newtrace", 10, 960)])
def test_real_workloads(real: dict[str, ModelProfile], sia_root: Path, trace: str, count: int, rows: int) -> None:
    files = sorted((sia_root / "workloads" / trace).glob("workload-*.csv"))
    assert len(files) == count
    for f in files:
        t = read_sia_workload(f, models=real)
        assert t.n_jobs == rows
        assert set(t.models) <= set(real)
        assert np.all(np.diff(t.frame.arrival.to_numpy()) >= 0)
        assert (t.frame.num_replicas >= 1).all() and (t.frame.batch_size >= 1).all()


def test_profiles_pickle(toy: ModelProfile) -> None:
    import pickle

    rtx = toy.machines["rtx"]
    before = rtx.times(2, 12, 20)  # builds the 3-D interpolator, which is not pickled
    back = pickle.loads(pickle.dumps(toy))
    assert back.machines["rtx"].times(2, 12, 20) == before
    assert float(back.progress_rate("t4", 1, 2, 20, 4, 1)) == float(toy.progress_rate("t4", 1, 2, 20, 4, 1))
    assert back.completion_progress == 320.0
