"""Analysis over the model: ordering, hazards, attribution, pairs, jobs, explain; verdicts as data."""
