"""Pure loss functions shared by every algorithm in jaxrl_suite.

All functions take arrays of any (matching) batch shape and return either a scalar (the mean over
all elements) or a per-element array, as each docstring states. They are pure, jittable and
vmappable, and hold no state. Tests compare each against a float64 numpy loop.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

Array = jax.Array

# Logit used for invalid actions. Finite (not -inf) so that softmax of an all-masked row stays
# defined and entropies stay finite.
MASKED_LOGIT = -1e9


def ppo_clip_loss(log_prob: Array, old_log_prob: Array, advantages: Array,
                  clip_eps: float) -> Array:
  """PPO clipped surrogate policy loss (Schulman et al. 2017, arXiv:1707.06347).

    r = exp(log_prob - old_log_prob)
    L = -mean(min(r * A, clip(r, 1 - eps, 1 + eps) * A))

  Args:
    log_prob: [...] log pi_theta(a|s) of the taken actions.
    old_log_prob: [...] log pi_old(a|s), treated as a constant.
    advantages: [...] advantage estimates, treated as constants.
    clip_eps: clipping range eps > 0.
  Returns:
    scalar loss.
  """
  ratio = jnp.exp(log_prob - jax.lax.stop_gradient(old_log_prob))
  advantages = jax.lax.stop_gradient(advantages)
  unclipped = ratio * advantages
  clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
  return -jnp.mean(jnp.minimum(unclipped, clipped))


def clipped_value_loss(values: Array, old_values: Array, targets: Array,
                       clip_eps: float) -> Array:
  """PPO clipped value loss, as in the openai/baselines and purejaxrl implementations.

    v_clip = old_v + clip(v - old_v, -eps, eps)
    L = 0.5 * mean(max((v - G)^2, (v_clip - G)^2))

  Args:
    values: [...] current value predictions V_theta(s).
    old_values: [...] predictions at rollout time (constants).
    targets: [...] value targets G (e.g. GAE returns), constants.
    clip_eps: clipping range.
  Returns:
    scalar loss.
  """
  old_values = jax.lax.stop_gradient(old_values)
  targets = jax.lax.stop_gradient(targets)
  v_clipped = old_values + jnp.clip(values - old_values, -clip_eps, clip_eps)
  return 0.5 * jnp.mean(jnp.maximum(jnp.square(values - targets),
                                    jnp.square(v_clipped - targets)))


def categorical_log_prob(logits: Array, actions: Array) -> Array:
  """log softmax(logits)[action]; logits [..., A], actions [...] int -> [...]."""
  log_p = jax.nn.log_softmax(logits, axis=-1)
  return jnp.take_along_axis(log_p, actions[..., None].astype(jnp.int32), axis=-1)[..., 0]


def categorical_entropy(logits: Array) -> Array:
  """Entropy H(softmax(logits)) = -sum_a p_a log p_a per element; logits [..., A] -> [...].

  Masked actions (logit MASKED_LOGIT) have p_a = 0 and contribute nothing.
  """
  log_p = jax.nn.log_softmax(logits, axis=-1)
  p = jnp.exp(log_p)
  return -jnp.sum(jnp.where(p > 0, p * log_p, 0.0), axis=-1)


def reinforce_loss(log_prob: Array, returns: Array, baseline: Array) -> Array:
  """REINFORCE with a baseline (Williams 1992): L = -mean(log pi(a|s) * (G - b)).

  `returns` and `baseline` are constants (stop-gradient); fit the baseline with its own loss
  (e.g. `0.5 * mean((b - G)^2)`).

  Args:
    log_prob: [...] log pi_theta(a|s).
    returns: [...] Monte-Carlo returns G.
    baseline: [...] state-value baseline b(s).
  Returns:
    scalar loss.
  """
  adv = jax.lax.stop_gradient(returns - baseline)
  return -jnp.mean(log_prob * adv)


def grpo_advantages(rewards: Array, eps: float = 1e-6, scale: bool = True) -> Array:
  """Group-relative advantages (GRPO, Shao et al. 2024, arXiv:2402.03300).

    A_i = (r_i - mean_j r_j) / (std_j r_j + eps)     over the G members of a group.

  Args:
    rewards: [..., G] rewards, one group per leading index.
    eps: added to the standard deviation so a group with equal rewards gives A = 0.
    scale: divide by the group std (False gives the Dr. GRPO mean-only variant).
  Returns:
    [..., G] advantages.
  """
  centered = rewards - jnp.mean(rewards, axis=-1, keepdims=True)
  if not scale:
    return centered
  return centered / (jnp.std(rewards, axis=-1, keepdims=True) + eps)


def kl_k3(log_p: Array, log_ref: Array) -> Array:
  """Schulman's k3 estimator of KL(p || ref) from samples of p, per element.

    k3 = exp(log_ref - log_p) - (log_ref - log_p) - 1   >= 0, unbiased for KL(p || ref).

  Args:
    log_p: [...] log p(x) of samples x ~ p.
    log_ref: [...] log ref(x) of the same samples.
  Returns:
    [...] non-negative per-sample estimates.
  """
  log_ratio = log_ref - log_p
  return jnp.exp(log_ratio) - log_ratio - 1.0
