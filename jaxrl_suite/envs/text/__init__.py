"""Text environments for LM agents: observations are token blocks, actions are token sequences."""
