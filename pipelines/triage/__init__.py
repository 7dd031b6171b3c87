"""Triage: the regression lifecycle people drive, and the owners' nightly digests."""
