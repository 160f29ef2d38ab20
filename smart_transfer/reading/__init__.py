"""Reading a dataset of a local workspace back, with no network: ``open_dataset`` and ``LocalDataset``
(tail, Arrow, pandas, Spark) and ``export`` (CSV, JSON lines, Parquet)."""
