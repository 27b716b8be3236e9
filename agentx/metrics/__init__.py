"""Summaries of a run: request metrics, server metrics (scraping and engine adapters), cost."""
