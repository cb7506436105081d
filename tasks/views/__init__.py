"""Views: the status view (text, JSON, HTML), backfill plans, run progress and the run summary. They ask
the freshness engine and read manifests; they never decide freshness themselves."""
