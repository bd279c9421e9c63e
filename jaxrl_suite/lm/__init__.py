"""Tiny language models and LLM-RL methods on them.

  tokenizer   versioned symbol vocabularies: v1 (V=32, Direct-OPD), v2 (V=96, text environments);
              defined in envs/text/tokenizer.py (lm/ sits above envs/), re-exported here
  model       pre-LN decoder-only transformer (flax.linen) with an explicit KV cache, per-sequence
              positions and key masks; FAMILY (v1, T=24) and FAMILY_V2 (v2, T=128-256); other
              architectures plug in through its `Architecture` protocol
  llama       Llama / Qwen3-style decoder (RMSNorm, RoPE, SwiGLU, GQA, q/k norms) behind the
              same interface (sampling, GRPO, Direct-OPD, rollouts, token PPO run it; tested)
  hf_checkpoint  Hugging Face checkpoint folders (config.json + safetensors) <-> LlamaConfig
              and parameters; hf_tokenizer: their tokenizer.json (docs/lm_checkpoints.md)
  sampling    temperature / top-k / top-p sampling in one lax.scan; Stepper composition
  tasks       verifiable column-addition tasks (CarryAdd, three-operand control), held-out split
  pretrain    pretraining on a task mixture, chunked jitted loops, orbax checkpoint cache
  grpo        GRPO (group-relative advantages, PPO clip, k3 KL to a reference), evaluation
  direct_opd  Direct-OPD: decode-time delta, distillation loss, adaptive alpha, vanilla OPD,
              shuffled-delta control
  opd_ladder  the Direct-OPD study's pretraining ladder (one family per seed, divergence rule)
  opd_study   the Direct-OPD study on one task: teacher GRPO, transfer rows, GRPO ceilings
  opd_folders Direct-OPD on user checkpoint folders (checks, then the transfer)
  opd_report  the study's descriptive tables, scale text and figure
  rollout     multi-turn rollouts against a TextEnvironment in one jitted program (KV cache,
              windows with truncate-oldest or compaction overflow policies); the Rollout record
  value       value heads (shared-trunk or separate critic) and the aligned token-scoring pass
  advantages  token-level GAE (continue / restart at window boundaries), GRPO, GiGPO step groups
  token_ppo   token-level PPO with token / sequence / segment loss normalisation, critic warm-up
  behaviour_cloning  pretraining a policy on scripted multi-turn rollouts (a pretrained start)
  checkpoint  LM checkpoints that record the config and the tokenizer version
  stapo_study the STAPO study's stages: warm start, detection, lr sweep, training until flat
  stapo_report  the STAPO study's summary table, markdown, figure and record payload
  compaction_study  the CompactionRL study's stages: warm starts, variant training, evaluation
  compaction_report  the CompactionRL study's tables, figure and record payload
  cure_study  the CuRe study's stages: captioner, rewards, held-out evaluator, GRPO per reward
  cure_scorers  the CuRe study's learned scorers (training, quality on held-out labels)
  cure_noise  the CuRe noisy-verifier check (one false claim appended; precision change)
  cure_report  the CuRe study's statistics (fall from peak; no verdicts), markdown and figure
"""
