"""Storage: the raw zone (local folder, SFTP) read, and the partitions written (the only Parquet and
manifest writer, locks, temporary names). No Luigi."""
