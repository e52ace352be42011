"""Stores of saved KV prefix states: a RAM tier and a disk tier, both pure and synchronous.

The :class:`~swapos.actors.kvcache.KVCache` actor applies them; the disk store's I/O runs in
worker threads. Both key a state by ``(identity, tokens)``: ``identity`` is the model's
:attr:`~swapos.backends.base.LoadedModel.kv_identity`, so a state is only ever offered to the
model it was taken from.
"""

from __future__ import annotations

from swapos.kvstore.disk import DiskLookup as DiskLookup
from swapos.kvstore.disk import DiskPut as DiskPut
from swapos.kvstore.disk import DiskStore as DiskStore
from swapos.kvstore.disk import default_kv_dir as default_kv_dir
from swapos.kvstore.ram import Dropped as Dropped
from swapos.kvstore.ram import RamStore as RamStore

__all__ = ["DiskLookup", "DiskPut", "DiskStore", "Dropped", "RamStore", "default_kv_dir"]
