"""Text environments for LM agents: observations are token blocks, actions are token sequences.

  tokenizer   the suite's versioned symbol vocabularies (v2 is the text environments' alphabet)
  claims      SceneCap's claim grammar, caption parser and claim-level rewards
  base        the TextEnvironment contract; kv_lookup, stream_ledger, goal_house, scene_cap

lm/ (the models and methods) imports these; nothing here imports lm/ (ARCHITECTURE.md, "Layers").
"""
