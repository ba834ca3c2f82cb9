"""One registry: a policy is registered where it is defined and ``make_policy(name, **params)``
is the only way from a name to a policy object (API, CLI ``--param``, TOML configs, sweeps).

Every name that works today keeps working; every registered name round-trips through
``make_policy``, ``hetsched.policies`` and the CLI parser; a bad name or parameter raises a
ValidationError naming the argument, the rule and the value; a new module file with the
decorator is all a new policy needs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import sys
import textwrap

import pytest

import hetsched as hs
from hetsched import cli, formulations
from hetsched.errors import UnknownPolicyError, ValidationError
from hetsched.formulations import base
from hetsched.sim.config import load_config

#: Names accepted before the registry change (README's policy list; tests and docs use them).
NAMES_TODAY = ["allox", "drf", "fifo", "finish_time_fairness", "gandiva_fair", "hierarchical_max_min_fairness",
               "isolated", "max_min_fairness", "max_min_fairness_water_filling", "max_sum_throughput",
               "min_makespan", "proportional", "sia"]
#: Public class names of ``hetsched.policies`` before the change (its old explicit list).
CLASSES_TODAY = {"AlloX": "allox", "DominantResourceFairness": "drf", "Fifo": "fifo",
                 "FinishTimeFairness": "finish_time_fairness", "GandivaFair": "gandiva_fair",
                 "HierarchicalMaxMinFairness": "hierarchical_max_min_fairness", "Isolated": "isolated",
                 "MaxMinFairness": "max_min_fairness", "MaxMinFairnessWaterFilling": "max_min_fairness_water_filling",
                 "MaxSumThroughput": "max_sum_throughput", "MinMakespan": "min_makespan",
                 "Proportional": "proportional", "Sia": "sia"}
OTHER_PUBLIC = {"Packing", "Partitioned", "PlacementSensitivity", "Policy", "list_policies", "make_policy",
                "register_policy"}


def _bool_params(name: str) -> list[str]:
    pol = base.make_policy(name)
    return [f for f in base.policy_parameters(type(pol)) if isinstance(getattr(pol, f), bool)]


def test_every_name_of_today_is_still_registered():
    assert set(NAMES_TODAY) <= set(hs.list_policies())
    assert hs.list_policies() == sorted(hs.list_policies())


def test_public_namespace_keeps_its_names():
    assert set(CLASSES_TODAY) | OTHER_PUBLIC <= set(hs.policies.__all__)
    for cls_name, name in CLASSES_TODAY.items():
        cls = getattr(hs.policies, cls_name)
        assert cls.name == name and isinstance(base.make_policy(name), cls)
    assert set(CLASSES_TODAY) <= set(dir(hs.policies))


@pytest.mark.parametrize("name", hs.list_policies())
def test_name_round_trips(name):
    pol = base.make_policy(name)
    assert pol.name == name
    assert type(pol).__name__ in hs.policies.__all__  # the public namespace has every registered class
    assert getattr(hs.policies, type(pol).__name__) is type(pol)
    assert hs.policies.make_policy(name).params() == pol.params()
    # the CLI without --param, and a policy object, give the same thing
    assert cli._make_policy(name, []).params() == pol.params()
    assert base.make_policy(pol) is pol


@pytest.mark.parametrize("name, param", [(n, p) for n in hs.list_policies() for p in _bool_params(n)])
def test_param_round_trips_through_cli_and_toml(tmp_path, name, param):
    """A flipped boolean parameter arrives the same through make_policy, the CLI parser and TOML."""
    default = getattr(base.make_policy(name), param)
    direct = base.make_policy(name, **{param: not default})
    assert getattr(direct, param) is (not default)
    via_cli = cli._make_policy(name, [f"{param}={'false' if default else 'true'}"])
    p = tmp_path / "x.toml"
    p.write_text(f"[cluster]\nv100 = 1\n[policies]\nx = {{ name = '{name}', {param} = {str(not default).lower()} }}\n")
    via_toml = load_config(p).policies["x"]
    assert via_cli.params() == direct.params() == via_toml.params()
    # on an object, params replace fields
    assert base.make_policy(base.make_policy(name), **{param: not default}).params() == direct.params()


# ------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("call, error, argument, rule, value", [
    (lambda: base.make_policy("fairest"), UnknownPolicyError, r"`policy`",
     r"not a known policy; choose one of \[.*'max_min_fairness'", r"'fairest'"),
    (lambda: base.make_policy(3), ValidationError, r"`policy`", r"must be a policy name \(str\)", r"int"),
    (lambda: base.make_policy("max_min_fairness", speed=2), ValidationError, r"`speed`",
     r"not all parameters of policy 'max_min_fairness'.*must be one of \[.*'second_stage'", r"speed=2"),
    (lambda: base.make_policy("max_min_fairness", second_stage="maybe"), ValidationError, r"`second_stage`",
     r"must be True or False", r"'maybe'"),
    (lambda: base.make_policy(hs.policies.Fifo(), backfill=2), ValidationError, r"`backfill`",
     r"must be True or False", r"got 2"),
    (lambda: cli._make_policy("fifo", ["backfill"]), ValidationError, r"`--param`", r"must be KEY=VALUE",
     r"'backfill'"),
    (lambda: cli._make_policy("fifo", ["=1"]), ValidationError, r"`--param`", r"must be KEY=VALUE", r"'=1'"),
    (lambda: cli._make_policy("fifo", ["speed=2"]), ValidationError, r"`speed`", r"must be one of \['backfill'\]",
     r"speed=2"),
    (lambda: hs.policies.NoSuchPolicy, AttributeError, r"'NoSuchPolicy'", r"has no attribute", r"MaxMinFairness"),
])
def test_bad_name_or_parameter(call, error, argument, rule, value):
    with pytest.raises(error) as info:
        call()
    msg = str(info.value)
    for part in (argument, rule, value):
        assert re.search(part, msg), (part, msg)


def test_cli_bad_param_exits_2_naming_it():
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = cli.main(["solve", "--jobs", "2", "--policy", "fifo", "--param", "speed=2"])
    assert rc == 2
    assert "`speed`" in err.getvalue() and "speed=2" in err.getvalue()


def test_toml_bad_param_names_file_and_label(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("[cluster]\nv100 = 1\n[policies]\nlbl = { name = 'fifo', backfill = 'yes' }\n")
    with pytest.raises(ValidationError, match=r"bad\.toml: \[policies\] 'lbl': `backfill` must be True or False; got 'yes'"):
        load_config(p)


# ------------------------------------------------------------------ adding a policy
PROBE = '''
from dataclasses import dataclass

import numpy as np

from hetsched.formulations.base import Policy, register_policy
from hetsched.formulations.params import check_real


@register_policy
@dataclass(frozen=True, kw_only=True)
class RegistryProbe(Policy):
    """Everyone gets ``share`` of their fastest type (test policy)."""

    name = "registry_probe"
    share: float = 0.5

    def __post_init__(self):
        check_real(self.share, "share", low=0.0, high=1.0)
'''


def test_a_module_file_with_the_decorator_is_enough(tmp_path, monkeypatch):
    """A new file in the formulations package registers its policy: make_policy, list_policies,
    hetsched.policies and the CLI see it, with nothing else edited."""
    (tmp_path / "registry_probe_mod.py").write_text(textwrap.dedent(PROBE))
    monkeypatch.setattr(base, "_POLICIES", dict(base._POLICIES))  # restored after the test
    monkeypatch.setattr(formulations, "__path__", [*formulations.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "hetsched.formulations.registry_probe_mod", raising=False)
    try:
        formulations._import_modules()  # what importing the package does
        assert "registry_probe" in hs.list_policies()
        pol = base.make_policy("registry_probe", share=0.25)
        assert type(pol).__name__ == "RegistryProbe" and pol.share == 0.25
        assert hs.policies.RegistryProbe is type(pol)
        assert cli._make_policy("registry_probe", ["share=0.75"]).share == 0.75
        with pytest.raises(ValidationError, match=r"`share` must be .*; got 2\.0"):
            base.make_policy("registry_probe", share=2.0)
    finally:
        sys.modules.pop("hetsched.formulations.registry_probe_mod", None)


def test_two_classes_cannot_share_a_name():
    @dataclasses.dataclass(frozen=True)
    class Impostor(base.Policy):
        name = "max_min_fairness"

    with pytest.raises(ValueError, match="taken by hetsched.formulations.max_min_fairness.MaxMinFairness"):
        base.register_policy(Impostor)
    assert base.make_policy("max_min_fairness").__class__.__name__ == "MaxMinFairness"


def test_the_decorator_makes_a_frozen_keyword_only_dataclass(monkeypatch):
    """``@register_policy`` alone gives a frozen, keyword-only dataclass; ``eq=False`` keeps
    identity comparison; a class that is already a dataclass is registered as it is."""
    monkeypatch.setattr(base, "_POLICIES", dict(base._POLICIES))  # restored after the test

    @base.register_policy
    class Plain(base.Policy):
        name = "decorator_probe_plain"
        share: float = 0.5

    pol = Plain(share=0.25)
    assert dataclasses.is_dataclass(Plain) and [f.name for f in dataclasses.fields(Plain)] == ["share"]
    assert pol == Plain(share=0.25) and pol != Plain(share=0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pol.share = 1.0
    with pytest.raises(TypeError):
        Plain(0.25)  # keyword-only
    assert base.make_policy("decorator_probe_plain", share=0.75).share == 0.75

    @base.register_policy(eq=False)
    class NoEq(base.Policy):
        name = "decorator_probe_noeq"
        share: float = 0.5

    assert NoEq() != NoEq() and base.registered_policies()["decorator_probe_noeq"] is NoEq

    @dataclasses.dataclass(frozen=True)
    class Own(base.Policy):
        name = "decorator_probe_own"
        share: float = 0.5

    assert base.register_policy(Own) is Own
    assert Own(0.3).share == 0.3  # its own (positional) dataclass, untouched
