"""Capture: a recording proxy for agent traffic and an anonymizer to WEKA traces."""
