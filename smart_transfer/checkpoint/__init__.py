"""RocksDB checkpoints as content-addressed files described by a manifest object (Samza/Venice style:
immutable SST files stored and moved once, mutable files always, atomic switch at the end)."""
