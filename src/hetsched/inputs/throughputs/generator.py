"""The project's synthetic throughput tables: :func:`generate_catalogue`, whose parameters
come from published measurements (see ``docs/data.md``); it is the default data everywhere.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import ValidationError
from ...validation import (
    as_rng,
    check_bool,
    check_int,
    check_interval,
    check_names,
    check_nonneg,
    check_positive,
    check_probability,
)
from .tables import PairThroughputs, ThroughputCatalogue

__all__ = ["DEFAULT_SPEEDUPS", "generate_catalogue"]

log = logging.getLogger(__name__)

#: Median single-GPU speedup of each known GPU type over a K80, used by
#: :func:`generate_catalogue` when ``gpu_types`` is a list of names. Sources in docs/data.md:
#: K80/P100/V100 from Gavel (Narayanan et al., OSDI'20, Fig. 1 and its published
#: measurement table); A100 is a project assumption (about 2x a V100).
DEFAULT_SPEEDUPS: dict[str, float] = {"k80": 1.0, "p100": 3.0, "v100": 4.0, "a100": 8.0}


def _speedup_table(gpu_types: Any) -> dict[str, float]:
    if isinstance(gpu_types, Mapping):
        names = check_names(list(gpu_types), "gpu_types", what="GPU type names")
        out: dict[str, float] = {}
        for t in names:
            out[t] = check_positive(gpu_types[t], f"gpu_types[{t!r}]", rule="a positive finite number (a median speedup)")
        return out
    names = check_names(gpu_types, "gpu_types", what="GPU type names")
    unknown = [t for t in names if t not in DEFAULT_SPEEDUPS]
    if unknown:
        raise ValidationError(
            f"`gpu_types` names {unknown}, which have no default median speedup (known: "
            f"{sorted(DEFAULT_SPEEDUPS)}); pass a mapping GPU type -> median speedup instead."
        )
    return {t: DEFAULT_SPEEDUPS[t] for t in names}


def generate_catalogue(
    n_job_types: int = 26,
    gpu_types: Sequence[str] | Mapping[str, float] = ("v100", "p100", "k80"),
    scale_factors: Sequence[int] = (1, 2, 4, 8),
    seed: int | np.random.Generator = 0,
    *,
    speedup_sigma: float = 0.4,
    noise_sigma: float = 0.1,
    base_throughput_range: tuple[float, float] = (0.25, 25.0),
    scaling_efficiency_range: tuple[float, float] = (0.7, 1.0),
    unconsolidated_slowdown_range: tuple[float, float] = (1.0, 3.0),
    pairs: bool = False,
    pair_infeasible_prob: float = 0.6,
    pair_combined_range: tuple[float, float] = (0.9, 1.5),
    pair_share_range: tuple[float, float] = (0.25, 0.75),
) -> ThroughputCatalogue:
    r"""Generate a synthetic throughput table (the project's default data).

    Every job type ("model") gets one row per scale factor. Parameters and their sources
    are listed in ``docs/data.md``; in short, with :math:`\mu_k` the median speedup of
    GPU type :math:`k` over a K80:

    * single-GPU throughput on a speedup-1 GPU: :math:`b_m \sim \mathrm{LogUniform}`
      (``base_throughput_range``, steps/s);
    * speedup of model :math:`m` on type :math:`k`:
      :math:`\log s_{mk} = (1 + \alpha_m) \log \mu_k + \epsilon_{mk}`, with
      :math:`\alpha_m \sim N(0, \sigma_\alpha^2)` (how much the model gains from newer
      GPUs, shared by all types, so speedups are monotone across generations for most
      models) and :math:`\epsilon_{mk} \sim N(0, \sigma_\epsilon^2)`; marginally
      lognormal around :math:`\mu_k`;
    * :math:`T_{m,s,k} = b_m\, s_{mk}\, s\, e_m^{\log_2 s}`, scaling efficiency per
      doubling :math:`e_m \sim U` (``scaling_efficiency_range``);
    * unconsolidated (:math:`s > 1`): :math:`T / (1 + (D - 1) w_k)`, :math:`D \sim U`
      (``unconsolidated_slowdown_range``) and
      :math:`w_k = \log(\mu_k/\mu_{\min}) / \log(\mu_{\max}/\mu_{\min})` (1 when all
      medians are equal): faster GPUs are more communication-bound, so more sensitive to
      placement; :math:`s = 1` rows equal their consolidated value;
    * ``pairs=True``: every unordered pair of rows with the same scale factor, on every
      type, cannot share with probability ``pair_infeasible_prob`` (throughputs (0, 0));
      otherwise the pair's combined normalized throughput :math:`c \sim U`
      (``pair_combined_range``) is split :math:`u : 1-u`, :math:`u \sim U`
      (``pair_share_range``; 1/2 for a row with itself), each member getting its share
      times its isolated throughput. Unconsolidated pair throughputs scale each member by
      its row's unconsolidated/consolidated ratio.

    Parameters
    ----------
    n_job_types : int, default 26
        Number of job types (Gavel's table has 26).
    gpu_types : sequence of str or mapping str -> float, default ("v100", "p100", "k80")
        GPU type names (looked up in :data:`DEFAULT_SPEEDUPS`) or a mapping of any names
        to their median single-GPU speedup over a K80 (or any common reference).
    scale_factors : sequence of int, default (1, 2, 4, 8)
        Scale factors every job type gets a row for.
    seed : int or numpy.random.Generator, default 0
        Source of randomness; the same seed gives the same table.
    speedup_sigma : float, default 0.4
        :math:`\sigma_\alpha`.
    noise_sigma : float, default 0.1
        :math:`\sigma_\epsilon`.
    base_throughput_range : (float, float), default (0.25, 25.0)
        Range of :math:`b_m`, steps/s.
    scaling_efficiency_range : (float, float), default (0.7, 1.0)
        Range of :math:`e_m`.
    unconsolidated_slowdown_range : (float, float), default (1.0, 3.0)
        Range of :math:`D`.
    pairs : bool, default False
        Also generate co-location throughputs.
    pair_infeasible_prob, pair_combined_range, pair_share_range
        Pair model parameters (see above).

    Returns
    -------
    ThroughputCatalogue
        Rows ``("model-00", 1), ("model-00", 2), ...``, columns in ``gpu_types`` order,
        with an unconsolidated table, and pairs when asked.

    Examples
    --------
    >>> cat = generate_catalogue(n_job_types=3, seed=1)
    >>> len(cat), cat.gpu_types, cat.available_scale_factors
    (12, ('v100', 'p100', 'k80'), (1, 2, 4, 8))
    >>> bool((cat.throughputs > 0).all())
    True
    >>> generate_catalogue(n_job_types=3, seed=1).throughputs.tolist() == cat.throughputs.tolist()
    True
    """
    n_models = check_int(n_job_types, "n_job_types", low=1)
    speedups = _speedup_table(gpu_types)
    types = tuple(speedups)
    mu = np.array([speedups[t] for t in types])
    sfs = _check_scale_factors(scale_factors)
    s_sigma = check_nonneg(speedup_sigma, "speedup_sigma")
    e_sigma = check_nonneg(noise_sigma, "noise_sigma")
    b_range = check_interval(base_throughput_range, "base_throughput_range", low=0.0, low_open=True)
    eff_range = check_interval(scaling_efficiency_range, "scaling_efficiency_range", low=0.0, high=1.0, low_open=True)
    d_range = check_interval(unconsolidated_slowdown_range, "unconsolidated_slowdown_range", low=1.0)
    check_bool(pairs, "pairs")
    p_inf = check_probability(pair_infeasible_prob, "pair_infeasible_prob")
    c_range = check_interval(pair_combined_range, "pair_combined_range", low=0.0, low_open=True)
    u_range = check_interval(pair_share_range, "pair_share_range", low=0.0, high=1.0, low_open=True)
    rng = as_rng(seed)

    m_types = len(types)
    n_sf = len(sfs)
    T, U = _draw_tables(rng, n_models, mu, sfs, s_sigma, e_sigma, b_range, eff_range, d_range)
    width = max(2, len(str(n_models - 1)))
    names = [f"model-{i:0{width}d}" for i in range(n_models)]
    job_types = np.repeat(np.array(names, dtype=object), n_sf)
    row_sf = np.tile(sfs, n_models)
    T2 = T.reshape(n_models * n_sf, m_types)
    U2 = U.reshape(n_models * n_sf, m_types)
    pair_table = _draw_pairs(rng, T2, U2, n_models, n_sf, p_inf, c_range, u_range) if pairs else None

    cat = ThroughputCatalogue(job_types, row_sf, types, T2, unconsolidated=U2, pairs=pair_table)
    log.debug("generated %r", cat)
    return cat


def _check_scale_factors(scale_factors: Any) -> np.ndarray:
    """``scale_factors`` checked (distinct positive integers, at least one) and sorted, as int64."""
    if isinstance(scale_factors, (str, bytes)) or not isinstance(scale_factors, (Sequence, np.ndarray)):
        raise ValidationError(f"`scale_factors` must be a sequence of positive integers; got {scale_factors!r}.")
    sfs_list = list(scale_factors)
    if not sfs_list or any(
        isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1 for s in sfs_list
    ) or len(set(sfs_list)) != len(sfs_list):
        raise ValidationError(
            f"`scale_factors` must be distinct positive integers (at least one); got {scale_factors!r}."
        )
    return np.array(sorted(int(s) for s in sfs_list), dtype=np.int64)


def _draw_tables(
    rng: np.random.Generator,
    n_models: int,
    mu: np.ndarray,
    sfs: np.ndarray,
    s_sigma: float,
    e_sigma: float,
    b_range: tuple[float, float],
    eff_range: tuple[float, float],
    d_range: tuple[float, float],
) -> tuple[np.ndarray, np.ndarray]:
    """Draw the consolidated and unconsolidated throughputs of :func:`generate_catalogue`
    (its model, with median speedups ``mu`` and scale factors ``sfs``); returns both as
    (models, scale factors, types) arrays."""
    m_types, n_sf = mu.shape[0], len(sfs)
    (b_lo, b_hi), (eff_lo, eff_hi), (d_lo, d_hi) = b_range, eff_range, d_range
    # Draw order is part of the reproducibility contract: base, alpha, eps, eff, D, pairs.
    base = np.exp(rng.uniform(np.log(b_lo), np.log(b_hi), size=n_models))
    alpha = rng.normal(0.0, s_sigma, size=n_models) if s_sigma > 0 else np.zeros(n_models)
    eps = rng.normal(0.0, e_sigma, size=(n_models, m_types)) if e_sigma > 0 else np.zeros((n_models, m_types))
    eff = rng.uniform(eff_lo, eff_hi, size=n_models)
    D = rng.uniform(d_lo, d_hi, size=(n_models, n_sf, m_types))

    speed = np.exp((1.0 + alpha)[:, None] * np.log(mu)[None, :] + eps)  # (models, types)
    single = base[:, None] * speed
    mult = sfs[None, :] * eff[:, None] ** np.log2(sfs)[None, :]  # (models, sf)
    T = single[:, None, :] * mult[:, :, None]  # (models, sf, types)
    lmu = np.log(mu)
    span = lmu.max() - lmu.min()
    w = (lmu - lmu.min()) / span if span > 0 else np.ones(m_types)
    divisor = 1.0 + (D - 1.0) * w[None, None, :]
    divisor[:, sfs == 1, :] = 1.0
    return T, T / divisor


def _draw_pairs(
    rng: np.random.Generator,
    T2: np.ndarray,
    U2: np.ndarray,
    n_models: int,
    n_sf: int,
    p_inf: float,
    c_range: tuple[float, float],
    u_range: tuple[float, float],
) -> PairThroughputs:
    """Draw :func:`generate_catalogue`'s pair throughputs over the rows' tables ``T2``/``U2``
    (rows model-major, ``n_sf`` per model): every unordered pair of rows with the same scale
    factor, after the tables' draws."""
    m_types = T2.shape[1]
    iu, ju = np.triu_indices(n_models)
    idx = []
    for q in range(n_sf):
        idx.append(np.stack([iu * n_sf + q, ju * n_sf + q], axis=1))
    index = np.concatenate(idx).astype(np.int64)
    P = index.shape[0]
    feasible = rng.random((P, m_types)) >= p_inf
    c = rng.uniform(c_range[0], c_range[1], size=(P, m_types))
    u = rng.uniform(u_range[0], u_range[1], size=(P, m_types))
    u[index[:, 0] == index[:, 1]] = 0.5
    ti, tj = T2[index[:, 0]], T2[index[:, 1]]
    thr = np.stack([c * u * ti, c * (1.0 - u) * tj], axis=2) * feasible[:, :, None]
    ratio_i = U2[index[:, 0]] / ti
    ratio_j = U2[index[:, 1]] / tj
    unc = thr * np.stack([ratio_i, ratio_j], axis=2)
    return PairThroughputs(index, thr, unc)
