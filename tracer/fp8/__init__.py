"""FP8 arithmetic on the host: the reference cast, DelayedScaling, and the corruption detector."""
