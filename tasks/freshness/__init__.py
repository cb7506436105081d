"""Freshness: is a partition up to date, and if not, why and what it waits for (no Luigi here).
Luigi tasks, the status view, plans and single runs all ask :mod:`tasks.freshness.engine`."""
