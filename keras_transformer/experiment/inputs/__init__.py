"""What a run reads before it trains: its files, run folder and initial model, and their checks."""
