"""HiveD (Zhao et al., "HiveD: Sharing a GPU Cluster for Deep Learning Guaranteed", OSDI 2020):
cells over a multi-level topology and their buddy allocation (:mod:`.cells`), tenants'
virtual clusters and the safety check (:mod:`.tenants`), the HiveD round scheduler
(:mod:`.scheduler`), the quota baseline (:mod:`.quota`), any policy inside the tenants'
quotas (:mod:`.policy`), the sharing-anomaly measure
(:mod:`.metrics`). See ``docs/hived.md``."""

from .cells import BuddyAllocator, CellForest, chain_fits
from .common import HiveDState, fragmentation
from .metrics import anomaly_delay
from .policy import TenantPolicy, TenantPolicyState
from .quota import QuotaScheduler
from .scheduler import HiveD, Setup
from .tenants import Tenant, Tenants, read_tenants

__all__ = ["BuddyAllocator", "CellForest", "HiveD", "HiveDState", "QuotaScheduler", "Setup", "Tenant", "TenantPolicy",
           "TenantPolicyState", "Tenants",
           "anomaly_delay", "chain_fits", "fragmentation", "read_tenants"]
