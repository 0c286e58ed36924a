"""Staff reference solutions (Triton). Never shipped to students."""
