"""Workloads that drive the reference CN: `transfer` (bank invariant), `orders` (many column
types, multi-DN transactions, shard-key moves, large transactions) and `ddl-mix` (DDL under DML)."""

from cdc_equipment.cn.workloads.runner import WorkloadStats, run_workload, set_up

__all__ = ["WorkloadStats", "run_workload", "set_up"]
