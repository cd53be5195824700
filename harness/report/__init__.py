"""Reports: the terminal summary and the self-contained HTML page."""
