"""Tiny language models and LLM-RL methods on them.

  tokenizer   one shared V=32 symbol vocabulary (every model, task and method uses it)
  model       pre-LN decoder-only transformer (flax.linen) with an explicit KV cache; FAMILY
  sampling    temperature / top-k / top-p sampling in one lax.scan; Stepper composition
  tasks       verifiable column-addition tasks (CarryAdd, three-operand control), held-out split
  pretrain    pretraining on a task mixture, chunked jitted loops, orbax checkpoint cache
  grpo        GRPO (group-relative advantages, PPO clip, k3 KL to a reference), evaluation
  direct_opd  Direct-OPD: decode-time delta, distillation loss, adaptive alpha, vanilla OPD,
              shuffled-delta control
"""
