"""Data vendors behind ``finbench data fetch``: each adapter declares its timestamp convention
and zone, fetches one (ticker, day) through the vendor's official SDK (an optional extra), and
normalises the SDK's objects into the store's bar columns."""

from finbench.data.vendors.base import VENDORS, Vendor, get_vendor

__all__ = ["VENDORS", "Vendor", "get_vendor"]
