"""Tests of hetsched.inputs.throughputs: the catalogue, the generator and the Gavel-format loader."""

from __future__ import annotations

import ast
import doctest
import json
import logging
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import hetsched.inputs.throughputs as thr_mod
from hetsched.errors import ValidationError
from hetsched.inputs.throughputs import (
    DEFAULT_SPEEDUPS,
    PairThroughputs,
    ThroughputCatalogue,
    generate_catalogue,
    load_gavel_throughputs,
)

GAVEL_PATH = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel" / "simulation_throughputs.json"


def test_doctests() -> None:
    result = doctest.testmod(thr_mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


# --------------------------------------------------------------------------- generator
class TestGenerator:
    def test_default_shape_and_labels(self) -> None:
        cat = generate_catalogue()
        assert len(cat) == 26 * 4
        assert cat.gpu_types == ("v100", "p100", "k80")
        assert cat.available_scale_factors == (1, 2, 4, 8)
        assert len(cat.job_type_names) == 26
        assert cat.throughputs.shape == (104, 3)
        assert cat.unconsolidated is not None and cat.unconsolidated.shape == (104, 3)
        assert cat.pairs is None
        df = cat.rows
        assert list(df.index.names) == ["job_type", "scale_factor"]
        assert list(df.columns) == ["v100", "p100", "k80"]
        assert cat.key(0) == ("model-00", 1) and cat.key(5) == ("model-01", 2)

    def test_deterministic_by_seed(self) -> None:
        a = generate_catalogue(seed=7, pairs=True)
        b = generate_catalogue(seed=7, pairs=True)
        c = generate_catalogue(seed=8, pairs=True)
        np.testing.assert_array_equal(a.throughputs, b.throughputs)
        np.testing.assert_array_equal(a.unconsolidated, b.unconsolidated)
        np.testing.assert_array_equal(a.pairs.throughputs, b.pairs.throughputs)
        assert not np.array_equal(a.throughputs, c.throughputs)
        g = generate_catalogue(seed=np.random.default_rng(7), pairs=True)
        np.testing.assert_array_equal(a.throughputs, g.throughputs)

    def test_positive_and_placement_rules(self) -> None:
        cat = generate_catalogue(seed=3)
        T, U = cat.throughputs, cat.unconsolidated
        assert np.isfinite(T).all() and (T > 0).all() and (U > 0).all()
        single = cat.scale_factors == 1
        np.testing.assert_array_equal(U[single], T[single])
        # Unconsolidated is slower by at most the largest slowdown (3), never faster.
        assert (U <= T * (1 + 1e-12)).all() and (U >= T / 3 - 1e-12).all()
        # The slowest type (speedup 1: k80) has w_k = 0, so it is placement-insensitive.
        k80 = cat.gpu_types.index("k80")
        np.testing.assert_allclose(U[:, k80], T[:, k80])
        base = T[single, k80]
        assert base.min() >= 0.25 * 0.5 and base.max() <= 25 * 2  # noise widens by exp(0.1 z)

    def test_scaling_efficiency_bounds(self) -> None:
        cat = generate_catalogue(seed=5)
        df = cat.rows
        for (jt, s), row in df.iterrows():
            if s == 1:
                continue
            eff = (row / (s * df.loc[(jt, 1)])).to_numpy()
            # throughput(s) = throughput(1) * s * e^log2(s), e in [0.7, 1]
            assert np.allclose(eff, eff[0])
            e = eff[0] ** (1 / math.log2(s))
            assert 0.7 - 1e-9 <= e <= 1.0 + 1e-9

    def test_speedups_monotone_ish_and_centred(self) -> None:
        fractions = []
        for seed in range(20):
            cat = generate_catalogue(seed=seed, gpu_types=("k80", "p100", "v100"))
            T = cat.throughputs[cat.scale_factors == 1]
            fractions.append(np.mean(np.all(np.diff(T, axis=1) >= 0, axis=1)))
        # documented: ~94% of models monotone on average; every seed mostly monotone
        assert np.mean(fractions) >= 0.85
        assert min(fractions) >= 0.6
        big = generate_catalogue(n_job_types=4000, gpu_types=DEFAULT_SPEEDUPS, scale_factors=(1,), seed=0)
        T = big.throughputs
        k80 = big.gpu_types.index("k80")
        for t, mu in DEFAULT_SPEEDUPS.items():
            med = np.median(T[:, big.gpu_types.index(t)] / T[:, k80])
            assert med == pytest.approx(mu, rel=0.05), t

    def test_custom_gpu_names_and_scale_factors(self) -> None:
        cat = generate_catalogue(n_job_types=3, gpu_types={"t4": 1.5, "h100": 12.0}, scale_factors=(4, 1), seed=0)
        assert cat.gpu_types == ("t4", "h100")
        assert cat.scale_factors.tolist() == [1, 4] * 3
        with pytest.raises(ValidationError, match="h100"):
            generate_catalogue(gpu_types=("v100", "h100"))

    def test_pairs(self) -> None:
        cat = generate_catalogue(n_job_types=10, seed=2, pairs=True)
        pairs = cat.pairs
        assert pairs is not None
        assert len(pairs) == 4 * 10 * 11 // 2
        i, j = pairs.index[:, 0], pairs.index[:, 1]
        assert (i <= j).all()
        np.testing.assert_array_equal(cat.scale_factors[i], cat.scale_factors[j])
        thr = pairs.throughputs
        feasible = (thr > 0).all(axis=2)
        assert ((thr == 0).all(axis=2) | feasible).all()
        assert 0.3 < feasible.mean() < 0.5  # 1 - 0.6 infeasible
        # normalized shares: combined in [0.9, 1.5]; self-pairs split evenly
        T = cat.throughputs
        norm = thr / np.stack([T[i], T[j]], axis=2)
        comb = norm.sum(axis=2)[feasible]
        assert comb.min() >= 0.9 - 1e-12 and comb.max() <= 1.5 + 1e-12
        self_pairs = (i == j)[:, None] & feasible
        np.testing.assert_allclose(norm[..., 0][self_pairs], norm[..., 1][self_pairs])
        assert pairs.unconsolidated is not None and (pairs.unconsolidated <= thr + 1e-12).all()

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"n_job_types": 0}, "n_job_types"),
            ({"gpu_types": "v100"}, "gpu_types"),
            ({"gpu_types": {"v100": -1.0}}, "median speedup"),
            ({"scale_factors": (1, 0)}, "scale_factors"),
            ({"scale_factors": (2, 2)}, "scale_factors"),
            ({"seed": -1}, "seed"),
            ({"seed": 1.5}, "seed"),
            ({"scaling_efficiency_range": (0.5, 1.2)}, "scaling_efficiency_range"),
            ({"unconsolidated_slowdown_range": (0.5, 2.0)}, "unconsolidated_slowdown_range"),
            ({"pair_infeasible_prob": 1.5}, "pair_infeasible_prob"),
        ],
    )
    def test_bad_arguments(self, kwargs: dict, match: str) -> None:
        with pytest.raises(ValidationError, match=match):
            generate_catalogue(**kwargs)


# --------------------------------------------------------------------------- catalogue
class TestCatalogue:
    def _small(self) -> ThroughputCatalogue:
        pairs = PairThroughputs([[0, 2], [1, 1]], [[[2.0, 1.0], [0.5, 0.25]], [[3.0, 3.0], [0.0, 0.0]]])
        return ThroughputCatalogue(
            ["a", "a", "b"], [1, 2, 1], ["v100", "k80"],
            [[4.0, 1.0], [7.0, 1.5], [2.0, 0.5]],
            unconsolidated=[[4.0, 1.0], [5.0, 1.5], [2.0, 0.5]],
            pairs=pairs,
        )

    def test_queries(self) -> None:
        cat = self._small()
        assert len(cat) == 3 and cat.n_gpu_types == 2
        assert cat.index_of(["b", "a"], [1, 2]).tolist() == [2, 1]
        with pytest.raises(ValidationError, match=r"\('a', 4\)"):
            cat.index_of(["a"], [4])
        assert cat.to_frame(unconsolidated=True).loc[("a", 2), "v100"] == 5.0
        assert "ThroughputCatalogue(n_rows=3" in repr(cat)
        with pytest.raises(ValueError):
            cat.throughputs[0, 0] = 1.0  # read-only

    def test_subset_reorders_columns_and_pairs(self) -> None:
        cat = self._small().subset(["k80", "v100"])
        assert cat.gpu_types == ("k80", "v100")
        np.testing.assert_array_equal(cat.throughputs[:, 0], [1.0, 1.5, 0.5])
        np.testing.assert_array_equal(cat.unconsolidated[:, 1], [4.0, 5.0, 2.0])
        assert cat.pairs.lookup(2, 0).tolist() == [[0.25, 0.5], [1.0, 2.0]]
        with pytest.raises(ValidationError, match="a100"):
            cat.subset(["a100"])
        with pytest.raises(ValidationError, match="unique"):
            cat.subset(["k80", "k80"])

    def test_pair_lookup(self) -> None:
        pairs = self._small().pairs
        assert pairs.positions([2, 0, 1, 0], [0, 2, 1, 1]).tolist() == [0, 0, 1, -1]
        with pytest.raises(KeyError):
            pairs.lookup(0, 1)

    @pytest.mark.parametrize(
        "kwargs, match",
        [
            ({"throughputs": [[1.0, 1.0], [1.0, float("nan")]]}, r"row \('b', 1\) on GPU type 'k80' is nan"),
            ({"throughputs": [[1.0, 1.0], [-2.0, 1.0]]}, r"non-negative.*'v100'.*-2\.0"),
            ({"throughputs": [[1.0, 1.0]]}, r"shape \(n_rows, n_gpu_types\) = \(2, 2\)"),
            ({"scale_factors": [1, 0]}, "scale_factors"),
            ({"job_types": ["a", "a"], "scale_factors": [1, 1]}, "unique"),
            ({"gpu_types": ["v100", "v100"]}, "unique"),
        ],
    )
    def test_validation(self, kwargs: dict, match: str) -> None:
        args = {"job_types": ["a", "b"], "scale_factors": [1, 1], "gpu_types": ["v100", "k80"],
                "throughputs": [[1.0, 1.0], [1.0, 1.0]]}
        args.update(kwargs)
        with pytest.raises(ValidationError, match=match):
            ThroughputCatalogue(**args)

    def test_pair_validation(self) -> None:
        with pytest.raises(ValidationError, match="ordered"):
            PairThroughputs([[1, 0]], [[[1.0, 1.0]]])
        with pytest.raises(ValidationError, match="once"):
            PairThroughputs([[0, 1], [0, 1]], [[[1.0, 1.0]], [[1.0, 1.0]]])
        with pytest.raises(ValidationError, match="non-negative"):
            PairThroughputs([[0, 1]], [[[1.0, -1.0]]])
        with pytest.raises(ValidationError, match="rows 0..0"):
            ThroughputCatalogue(["a"], [1], ["v100"], [[1.0]], pairs=PairThroughputs([[0, 1]], [[[1.0, 1.0]]]))


# ------------------------------------------------------------------------------ loader
A1 = "('A (batch size 8)', 1)"
A2 = "('A (batch size 8)', 2)"
B1 = "('B', 1)"


def _fixture() -> dict:
    return {
        "v100": {
            A1: {"null": 10.0, B1: [6.0, 1.5], A1: [5.0, 5.0]},
            A2: {"null": 18.0},
            B1: {"null": 3.0, A1: [1.5, 6.0]},
        },
        "k80": {
            A1: {"null": 2.0, B1: [0.0, 0.0]},
            B1: {"null": 0.5},
        },
        "v100_unconsolidated": {
            A1: {"null": 10.0},
            A2: {"null": 9.0},
            B1: {"null": 3.0},
        },
    }


def _write(tmp_path: Path, obj: object, name: str = "t.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return p


class TestLoader:
    def test_fixture_exact(self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        # the fixture lacks ('A (batch size 8)', 2) on k80: an error by default (issue 30),
        # throughput 0 there when asked for explicitly
        with pytest.raises(ValidationError, match=r"1 row\(s\) .* no isolated throughput on some GPU type: "
                                                  r"\('A \(batch size 8\)', 2\) on \['k80'\]"):
            load_gavel_throughputs(_write(tmp_path, _fixture()))
        with caplog.at_level(logging.INFO, logger="hetsched.inputs.throughputs"):
            cat = load_gavel_throughputs(_write(tmp_path, _fixture()), missing="zero")
        assert cat.gpu_types == ("v100", "k80")
        assert [cat.key(r) for r in range(len(cat))] == [("A (batch size 8)", 1), ("A (batch size 8)", 2), ("B", 1)]
        np.testing.assert_array_equal(cat.throughputs, [[10.0, 2.0], [18.0, 0.0], [3.0, 0.5]])
        # k80 has no unconsolidated table: it copies the consolidated column
        np.testing.assert_array_equal(cat.unconsolidated, [[10.0, 2.0], [9.0, 0.0], [3.0, 0.5]])
        # the missing (A, 2) row on k80 was logged, as a warning
        assert any("'k80' lacks 1 row" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)
        pairs = cat.pairs
        assert pairs.index.tolist() == [[0, 0], [0, 2]]
        np.testing.assert_array_equal(pairs.throughputs[0], [[5.0, 5.0], [0.0, 0.0]])
        np.testing.assert_array_equal(pairs.throughputs[1], [[6.0, 1.5], [0.0, 0.0]])
        assert pairs.lookup(2, 0).tolist() == [[1.5, 6.0], [0.0, 0.0]]
        np.testing.assert_array_equal(pairs.unconsolidated, np.zeros((2, 2, 2)))

    def test_accepts_str_path_and_strict(self, tmp_path: Path) -> None:
        p = _write(tmp_path, _fixture())
        assert len(load_gavel_throughputs(str(p), missing="zero")) == 3
        with pytest.raises(ValidationError, match=r"'k80' lacks 1 row.*strict"):
            load_gavel_throughputs(p, strict=True)
        with pytest.raises(ValidationError, match=r"'k80' lacks 1 row.*strict"):
            load_gavel_throughputs(p, strict=True, missing="zero")

    def test_missing_file(self, tmp_path: Path) -> None:
        missing = tmp_path / "nope.json"
        with pytest.raises(ValidationError, match="`path`.*nope.json"):
            load_gavel_throughputs(missing)

    def test_nan_names_gpu_type_and_key(self, tmp_path: Path) -> None:
        obj = _fixture()
        obj["k80"][B1]["null"] = float("nan")  # json.dumps writes NaN, json.load reads it
        with pytest.raises(ValidationError, match=r"GPU type 'k80', key \"\('B', 1\)\".*got nan"):
            load_gavel_throughputs(_write(tmp_path, obj))

    def test_negative_pair_value(self, tmp_path: Path) -> None:
        obj = _fixture()
        obj["v100"][A1][B1] = [6.0, -1.0]
        with pytest.raises(ValidationError, match=r"'v100'.*A \(batch size 8\).*-1\.0"):
            load_gavel_throughputs(_write(tmp_path, obj))

    @pytest.mark.parametrize(
        "mutate, match",
        [
            (lambda o: o["v100"].update({"A-1": {"null": 1.0}}), "tuple literals"),
            (lambda o: o["v100"].update({"('C', 0)": {"null": 1.0}}), "positive integer scale factor"),
            (lambda o: o["v100"].update({"('C', True)": {"null": 1.0}}), "tuple literals"),
            (lambda o: o["v100"][B1].pop("null"), "null"),
            (lambda o: o["v100"][B1].update({"null": "3.0"}), "number"),
            (lambda o: o["v100"][B1].update({A1: [1.0]}), r"\[thr_self, thr_other\]"),
            (lambda o: o.update({"p100_unconsolidated": {}}), "no consolidated type 'p100'"),
            (lambda o: o["k80"][B1].update({"('Z', 1)": [1.0, 1.0]}), r"pair key \"\('Z', 1\)\" must name a row"),
        ],
    )
    def test_malformed(self, tmp_path: Path, mutate, match: str) -> None:
        obj = _fixture()
        mutate(obj)
        with pytest.raises(ValidationError, match=match):
            load_gavel_throughputs(_write(tmp_path, obj))

    def test_bad_json(self, tmp_path: Path) -> None:
        p = tmp_path / "bad.json"
        p.write_text("{not json")
        with pytest.raises(ValidationError, match="valid JSON"):
            load_gavel_throughputs(p)
        with pytest.raises(ValidationError, match="non-empty JSON object"):
            load_gavel_throughputs(_write(tmp_path, [1, 2], "list.json"))

    def test_disagreeing_mirror(self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        obj = _fixture()
        obj["v100"][B1][A1] = [1.0, 7.0]  # mirror of A1's [6.0, 1.5] would be [1.5, 6.0]
        p = _write(tmp_path, obj)
        with caplog.at_level(logging.WARNING, logger="hetsched.inputs.throughputs"):
            cat = load_gavel_throughputs(p, missing="zero")
        assert cat.pairs.lookup(0, 2)[0].tolist() == [6.0, 1.5]  # lower row wins
        assert any("disagree" in r.getMessage() for r in caplog.records)
        # strict: the mirror's disagreement itself (the file given every row on every type;
        # "disagree" alone would also match this test's tmp_path)
        obj["k80"][A2] = {"null": 0.0}
        obj["k80_unconsolidated"] = {k: {"null": v["null"]} for k, v in obj["k80"].items()}
        with pytest.raises(ValidationError, match="pair entr\\(ies\\) on GPU column 0 disagree with their mirror"):
            load_gavel_throughputs(_write(tmp_path, obj, "complete.json"), strict=True)


@pytest.mark.skipif(not GAVEL_PATH.is_file(), reason="Gavel's throughput table not present")
def test_real_gavel_file() -> None:
    raw = json.loads(GAVEL_PATH.read_text())
    base = [t for t in raw if not t.endswith("_unconsolidated")]
    keys = sorted({ast.literal_eval(k) for t in raw for k in raw[t]})
    cat = load_gavel_throughputs(GAVEL_PATH)
    assert set(cat.gpu_types) == set(base)
    assert len(cat) == len(keys)
    assert len(cat.job_type_names) == len({k[0] for k in keys})
    assert set(cat.available_scale_factors) == {k[1] for k in keys}
    # every value equals the file's (0 where the file has no row on that type)
    for t in base:
        k = cat.gpu_types.index(t)
        for r in range(len(cat)):
            key = str(cat.key(r))
            want = raw[t][key]["null"] if key in raw[t] else 0.0
            assert cat.throughputs[r, k] == want
            ut = t + "_unconsolidated"
            if ut in raw:
                want_u = raw[ut][key]["null"] if key in raw[ut] else 0.0
                assert cat.unconsolidated[r, k] == want_u
    # pairs: one per unordered pair of rows named anywhere in the file
    unordered = set()
    for t in raw:
        for key, cell in raw[t].items():
            a = ast.literal_eval(key)
            for other in cell:
                if other != "null":
                    b = ast.literal_eval(other)
                    unordered.add((min(a, b), max(a, b)))
    assert len(cat.pairs) == len(unordered)
    # spot-check pair values in both orientations against the file
    t = base[0]
    k = cat.gpu_types.index(t)
    checked = 0
    for key, cell in list(raw[t].items())[:5]:
        for other, val in list(cell.items())[:6]:
            if other == "null":
                continue
            ra = int(cat.index_of([ast.literal_eval(key)[0]], [ast.literal_eval(key)[1]])[0])
            rb = int(cat.index_of([ast.literal_eval(other)[0]], [ast.literal_eval(other)[1]])[0])
            assert cat.pairs.lookup(ra, rb)[k].tolist() == [float(v) for v in val]
            checked += 1
    assert checked > 0
    assert isinstance(cat.rows, pd.DataFrame)


# ------------------------------------------------------------------- round trip (Hypothesis)
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _to_gavel(cat: ThroughputCatalogue) -> dict:
    """Write a catalogue in Gavel's format (both orientations of every pair), independently of the loader."""
    out: dict = {}
    for unc in (False, True):
        table = cat.unconsolidated if unc else cat.throughputs
        ptable = cat.pairs.unconsolidated if unc else cat.pairs.throughputs
        for k, t in enumerate(cat.gpu_types):
            name = t + "_unconsolidated" if unc else t
            d = {str(cat.key(r)): {"null": float(table[r, k])} for r in range(len(cat))}
            for p, (i, j) in enumerate(cat.pairs.index.tolist()):
                a, b = ptable[p, k].tolist()
                d[str(cat.key(i))][str(cat.key(j))] = [a, b]
                d[str(cat.key(j))][str(cat.key(i))] = [b, a]
            out[name] = d
    return out


@settings(max_examples=15, deadline=None)
@given(n_types=st.integers(1, 4), seed=st.integers(0, 2**31 - 1), n_gpu=st.integers(1, 3))
def test_gavel_round_trip(tmp_path_factory: pytest.TempPathFactory, n_types: int, seed: int, n_gpu: int) -> None:
    gpus = dict(list({"k80": 1.0, "p100": 3.0, "v100": 4.0}.items())[:n_gpu])
    cat = generate_catalogue(n_job_types=n_types, gpu_types=gpus, scale_factors=(1, 2), seed=seed, pairs=True)
    path = _write(tmp_path_factory.mktemp("rt"), _to_gavel(cat))
    back = load_gavel_throughputs(path, strict=True)
    assert back.gpu_types == cat.gpu_types
    assert [back.key(r) for r in range(len(back))] == sorted(cat.key(r) for r in range(len(cat)))
    order = cat.index_of(back.job_types, back.scale_factors)
    np.testing.assert_array_equal(back.throughputs, cat.throughputs[order])
    np.testing.assert_array_equal(back.unconsolidated, cat.unconsolidated[order])
    # every pair of the generator is found with the same values, in either orientation
    pos = back.pairs.positions(np.argsort(order)[cat.pairs.index[:, 0]], np.argsort(order)[cat.pairs.index[:, 1]])
    assert (pos >= 0).all() and len(back.pairs) == len(cat.pairs)
    for p, (i, j) in enumerate(cat.pairs.index.tolist()):
        bi, bj = int(np.argsort(order)[i]), int(np.argsort(order)[j])
        np.testing.assert_array_equal(back.pairs.lookup(bi, bj), cat.pairs.throughputs[p])
        np.testing.assert_array_equal(back.pairs.lookup(bi, bj, unconsolidated=True), cat.pairs.unconsolidated[p])


# --------------------------------------------------------------------------- package layout (issue 24)
def test_package_reexports_every_public_name() -> None:
    from hetsched.inputs.throughputs import gavel, generator, tables

    homes = {"ThroughputCatalogue": tables, "PairThroughputs": tables, "reference_column": tables,
             "load_gavel_throughputs": gavel, "gavel_throughputs": gavel, "gavel_throughputs_path": gavel,
             "GAVEL_THROUGHPUTS_ENV": gavel, "UNCONSOLIDATED_SUFFIX": gavel, "generate_catalogue": generator,
             "DEFAULT_SPEEDUPS": generator}
    assert set(thr_mod.__all__) == set(homes)
    for name, mod in homes.items():
        assert getattr(thr_mod, name) is getattr(mod, name)
