"""Ingest with PySpark: input files -> Parquet data slices + an AddData block + a RocksDB checkpoint."""
