"""Ad-platform tasks (contract section 4): restated days and the 7-day look-back."""

from __future__ import annotations

import datetime as dt
import logging

from tasks import catalogue, settings
from tasks.base import PartitionedTask
from tasks.building import Built
from tasks.freshness.engine import Engine
from tasks.freshness.inputs import input_line
from tasks.nextdate import kept_for_next_date
from tasks.storage.rawzone import RawFile

DAY = dt.timedelta(days=1)
logger = logging.getLogger("luigi-interface")


class AdsDaily(PartitionedTask, entry=catalogue.ADS_DAILY):
    """ads_daily: one row per campaign per date, as the newest export of ``d+1 .. d+7`` reports it."""

    def restatement_days(self) -> int:
        return settings.ads().restatement_days

    def any_raw_window(self) -> list[tuple[str, dt.date]]:
        return [("ads", self.date + k * DAY) for k in range(1, self.restatement_days() + 1)]

    input_names = "ads.csv"

    def accepts_input(self, name: str) -> bool:
        return name == "ads.csv"

    def rules(self) -> dict:
        return {"version": self.version, "restatement_days": self.restatement_days()}

    def max_reject_share(self) -> float:
        return settings.ads().max_reject_share

    def provisional(self, cache: Engine) -> bool:
        """Up to date, but export d+7 has not arrived: a later export may still restate it."""
        manifest = cache.summary(cache.once_per_pass(("store", self.dataset_path()), self.store), self.date) or {}
        return manifest.get("stats", {}).get("is_final") is False

    def build(self, inputs: list[RawFile]) -> Built:
        from tasks.transforms.ads import RAW_COLUMNS, newest_restatement
        from tasks.transforms.rawcsv import parse_csv

        zone = self.zone()
        # each export is read by 7 consecutive dates: a single-run range parses it once
        parsed = [
            kept_for_next_date(
                ("ads parsed", input_line(f)), lambda f=f: parse_csv(zone.read_input(f), f.relpath, RAW_COLUMNS)
            )
            for f in inputs
        ]
        exports = [(f.folder_date, p) for f, p in zip(inputs, parsed, strict=True)]
        result = newest_restatement(exports, self.date, self.restatement_days())
        final_export = self.date + self.restatement_days() * DAY
        stats = {
            "source_export_date": result.source_export_date,
            "exports_read": [f.folder_date.isoformat() for f in inputs],
            "is_final": any(f.folder_date == final_export for f in inputs),
            "rows_read": result.rows_read,
            "attributed_rows": result.attributed_rows,
            "other_date_rows": result.other_date_rows,
            "superseded_rows": result.superseded_rows,
            "duplicates_dropped": result.duplicates_dropped,
        }
        stats.update(self._emptied_exports(inputs, result.source_export_date))
        return Built(result.table, result.rejected, stats)

    def _emptied_exports(self, inputs: list[RawFile], source: dt.date | None) -> dict:
        """A warning for the export that gave the date's rows in the previous build (same rules) and gives none
        now, while no export as new holds the date: the date went back to an older export's rows, or to none."""
        from tasks.reporting import names
        from tasks.targets import luigi_engine

        manifest = luigi_engine().manifest(self.store(), self.date) or {}
        previous = (
            (manifest.get("stats") or {}) if manifest.get("rules_fingerprint") == self.rules_fingerprint() else {}
        )
        now = source.isoformat() if source else ""
        emptied = {e: why for e, why in (previous.get("emptied_exports") or {}).items() if now < e}
        was, rows = previous.get("source_export_date"), previous.get("attributed_rows")
        if was and rows and now < was and was not in emptied:
            files = [f.relpath for f in inputs if f.folder_date.isoformat() == was]
            then = f"{self.date} is export {now}'s now" if now else f"{self.date} has no rows now"
            emptied[was] = (
                f"export {files[0]} gave {rows} rows of {self.date} in an earlier build and gives none now "
                f"(re-sent with its header only?); {then}"
                if files
                else f"export {was} gave {rows} rows of {self.date} in an earlier build and is gone now "
                f"(removed from the raw zone?); {then}"
            )
            logger.warning("%s: %s", names.label(self), emptied[was])
        return {"emptied_exports": emptied, "warnings": list(emptied.values())} if emptied else {}


class AdsRolling7d(PartitionedTask, entry=catalogue.ADS_ROLLING_7D):
    """ads_rolling_7d: one row per campaign per date, summed over the look-back up to ``d``."""

    def window_dates(self) -> list[dt.date]:
        start, days = settings.daybreak().start_date, settings.ads().rolling_window_days
        return [d for d in (self.date - k * DAY for k in range(days - 1, -1, -1)) if d >= start]

    def upstream(self) -> list[PartitionedTask]:
        return [AdsDaily(date=d) for d in self.window_dates()]

    def provisional(self, cache: Engine) -> bool:
        """Provisional while a day of its window is."""
        return any(up.provisional(cache) for up in self.upstream())

    def _cut(self) -> bool:
        """Whether ``[daybreak] start_date`` cuts this window short."""
        return settings.daybreak().start_date > self.date - (settings.ads().rolling_window_days - 1) * DAY

    def rules_key(self) -> tuple:
        return (*super().rules_key(), self._cut())

    def settings_read(self) -> dict:
        """Its rules with ``start_date`` whether it cuts the window or not: moving it back is a change too."""
        return {**self.rules(), "start_date": settings.daybreak().start_date.isoformat()}

    def rules(self) -> dict:
        """``start_date`` only for a window it cuts: moving it leaves the whole windows as they are."""
        cfg = settings.ads()
        start_date = settings.daybreak().start_date.isoformat() if self._cut() else None
        return {"version": self.version, "window_days": cfg.rolling_window_days, "start_date": start_date}

    def build(self, inputs: list[RawFile]) -> Built:
        from tasks.transforms.ads import rolling_window

        days = [(u.date, u.store().read_table(u.date)) for u in self.upstream()]
        table = rolling_window(days, len(days))
        return Built(table, None, {"window": [d.isoformat() for d, _ in days], "days_in_window": len(days)})
