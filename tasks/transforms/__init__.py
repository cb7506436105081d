"""Pure transforms: tables (or raw bytes) in, tables out. No Luigi, no paths, no clock."""
