"""Freshness: is a partition up to date, and if not, why and what it waits for (no Luigi here).

:mod:`tasks.freshness.engine` holds the rules and the process-wide memo; Luigi tasks, the status
view, backfill plans and single runs all ask it (docs/architecture.md).
"""
