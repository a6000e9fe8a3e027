"""Atomic, versioned, checksummed trial checkpoints in a folder or on S3 (through fsspec).

>>> from spottune.checkpoint import open_store
>>> store = open_store("memory://doc-example")
>>> import pathlib, tempfile
>>> d = pathlib.Path(tempfile.mkdtemp()); _ = (d / "w.txt").write_text("42")
>>> store.save("t00", d, step=10).version
1
>>> store.latest_good("t00").step
10
"""

from spottune.checkpoint._base import (CheckpointInfo, CheckpointStore, FileEntry, RetryPolicy, StoreHealth,
                                       StoreMonitor, StoreUnavailable)
from spottune.checkpoint._store import FsspecCheckpointStore, is_transient, open_store

__all__ = ["CheckpointInfo", "CheckpointStore", "FileEntry", "FsspecCheckpointStore", "RetryPolicy", "StoreHealth",
           "StoreMonitor", "StoreUnavailable", "is_transient", "open_store"]
