"""What a user asks of hetsched in a job's ``--comment``: ``hetsched:KEY=VALUE;KEY=VALUE``.

Keys (all optional):

``job_type``
    A job type of the throughput table (its measured rates are the prior).
``total_steps``
    Steps the job runs in all (policies that need remaining steps require it).
``weight``, ``entity``
    Priority weight; owner (hierarchical policies).
``throughputs``
    Steps/s per GPU type, ``v100:2.0,k80:0.5`` (override the table; 0: cannot run there).
``gpus``
    The gang size when the job was submitted without ``--gres=gpu:N``.
``model``, ``batch_size``
    For an adaptive scheduler (Pollux, the adaptive Sia, Optimus): the job's model (one
    of the driver's profiles; required then) and its submitted total batch size (default:
    the model's initial batch). The gang is the GPUs it was submitted with; the scheduler
    then chooses its GPU type, count and batch every round (the lease file tells the job).

A job with no comment is taken as is: its gang is its ``--gres`` count, its rates are
learned from its reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import ValidationError
from .records import SlurmJob

__all__ = ["PREFIX", "JobRequest", "parse_request"]

#: How a comment addressed to hetsched starts.
PREFIX = "hetsched:"
_KEYS = ("job_type", "total_steps", "weight", "entity", "throughputs", "gpus", "model", "batch_size")


@dataclass(frozen=True)
class JobRequest:
    """A job's request, ready for :meth:`OnlineScheduler.submit` (``gpus`` is its ``scale_factor``)."""

    gpus: int
    job_type: str | None = None
    total_steps: float | None = None
    weight: float = 1.0
    entity: str | None = None
    throughputs: dict[str, float] = field(default_factory=dict)
    model: str | None = None
    batch_size: int | None = None


def parse_request(job: SlurmJob) -> JobRequest:
    """The request of ``job`` (see the module docstring).

    Raises
    ------
    ValidationError
        An unknown key, a value that is not a number where one is needed, or no GPUs asked
        for; the message names the job, the key and the value.

    Examples
    --------
    >>> from hetsched.slurm.records import SlurmJob
    >>> r = parse_request(SlurmJob("7", "PENDING", True, 2, comment="hetsched:job_type=LM;total_steps=1e4"))
    >>> r.gpus, r.job_type, r.total_steps, r.weight, r.model
    (2, 'LM', 10000.0, 1.0, None)
    >>> parse_request(SlurmJob("8", "PENDING", True, 1, comment="hetsched:model=bert;batch_size=64")).batch_size
    64
    """
    fields: dict[str, str] = {}
    text = job.comment.strip()
    if text.startswith(PREFIX):
        for item in text[len(PREFIX):].split(";"):
            if not item.strip():
                continue
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or key not in _KEYS:
                raise ValidationError(f"job {job.job_id}: `--comment` key {key!r} must be one of {list(_KEYS)} "
                                      f"written KEY=VALUE; got {item!r}.")
            fields[key] = value.strip()
    gpus = _number(job, "gpus", fields["gpus"]) if "gpus" in fields else job.gpus
    if gpus != int(gpus) or gpus < 1:
        raise ValidationError(f"job {job.job_id}: its GPUs (--gres=gpu:N or gpus= in --comment) must be a whole "
                              f"number >= 1; got {gpus!r}.")
    rates = {}
    for pair in filter(None, (p.strip() for p in fields.get("throughputs", "").split(","))):
        kind, sep, value = pair.partition(":")
        if not sep:
            raise ValidationError(f"job {job.job_id}: `throughputs` entries must be TYPE:STEPS_PER_S; got {pair!r}.")
        rates[kind.strip()] = _number(job, f"throughputs[{kind.strip()}]", value)
    batch = None
    if "batch_size" in fields:
        batch = _number(job, "batch_size", fields["batch_size"])
        if batch != int(batch) or batch < 1:
            raise ValidationError(f"job {job.job_id}: `batch_size` in its --comment must be a whole number >= 1; "
                                  f"got {fields['batch_size']!r}.")
        batch = int(batch)
    return JobRequest(int(gpus), fields.get("job_type") or None,
                      _number(job, "total_steps", fields["total_steps"]) if "total_steps" in fields else None,
                      _number(job, "weight", fields["weight"]) if "weight" in fields else 1.0,
                      fields.get("entity") or None, rates, fields.get("model") or None, batch)


def _number(job: SlurmJob, key: str, value: str) -> float:
    try:
        return float(value)
    except ValueError:
        raise ValidationError(f"job {job.job_id}: `{key}` in its --comment must be a number; got {value!r}.") from None
