"""Dataflows: loop-nest mappings, tilings, stationarity and access counts."""
