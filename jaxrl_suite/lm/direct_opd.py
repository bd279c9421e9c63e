"""Direct-OPD (arXiv 2607.05394): transfer an RL *delta* from a small model to other models.

The recorded object is nothing but two checkpoints of the small teacher, its pre-RL reference
theta_ref and its post-RL policy theta_RL. The delta is evaluated on demand at any prefix s:

  r(s) = log_softmax(f_RL(s)) - log_softmax(f_ref(s))            in R^V        (`delta_log_ratio`)

Two ways to apply it to a model L (same tokenizer, any size):

* decode time (EFT / proxy-tuning form):  l~(s) = log_softmax(f_L(s)) + beta r(s)
  (`delta_decode_logits`, `delta_stepper`; 3 forward passes per token).
* distillation into L's weights on L's own rollouts (`direct_opd_loss`), full vocabulary:

    L(theta) = -(1/sum T) sum_{b,t} sum_v sg(pi_theta(v|s_t) r_t(v)) log pi_theta(v|s_t)
               + alpha * mean_t KL(pi_theta || pi_S)(s_t)     (exact, or k3 on y_t as the paper)

  whose first term's gradient is exactly grad_theta E_{v~pi_theta(.|s_t)}[r_t(v)] per visited
  state, and alpha adapts (`adaptive_alpha`, the paper's Eq. 16):
    alpha <- clip(alpha (1 + eps sign(rbar)), alpha_min, alpha_max),  rbar = batch mean of E_p[r].
  The stationary point of E[r] - alpha KL(pi || pi_S) is pi* ∝ pi_S (pi_RL / pi_ref)^(1/alpha).

Baselines with the same harness: vanilla on-policy distillation toward the RL teacher
(`vanilla_opd_loss`: full-vocab reverse KL(pi_theta || pi_RL) on student states) and the
shuffled-delta control (`shuffle_delta`: r permuted over the vocabulary by a fixed permutation,
which keeps its magnitude and destroys its meaning).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, Optional

import jax
import jax.numpy as jnp
import optax

from jaxrl_suite.core import distributed
from jaxrl_suite.core import losses
from jaxrl_suite.envs.text import tokenizer
from jaxrl_suite.lm import grpo as lm_grpo
from jaxrl_suite.lm import model as lm_model
from jaxrl_suite.lm import sampling

MODES = ("direct_opd", "vanilla_opd", "shuffled")


# ---- the delta -----------------------------------------------------------------------------------
def delta_log_ratio(rl_logits: jax.Array, ref_logits: jax.Array) -> jax.Array:
  """r = log pi_RL - log pi_ref over the vocabulary: [..., V] -> [..., V]."""
  return jax.nn.log_softmax(rl_logits, axis=-1) - jax.nn.log_softmax(ref_logits, axis=-1)


def shuffle_delta(delta: jax.Array, perm: jax.Array) -> jax.Array:
  """Control: r'(v) = r(perm[v]) for a fixed vocabulary permutation `perm` [V]."""
  return jnp.take(delta, perm, axis=-1)


def control_permutation(key: jax.Array, vocab_size: int = tokenizer.VOCAB_SIZE) -> jax.Array:
  """A fixed-point-free permutation of the vocabulary (a random cyclic shift of a shuffle)."""
  perm = jax.random.permutation(key, vocab_size)
  return jnp.roll(perm, 1)[jnp.argsort(perm)]  # maps perm[i] -> perm[i-1]: no fixed points


def delta_decode_logits(l_logits: jax.Array, ref_logits: jax.Array, rl_logits: jax.Array,
                        beta: float, perm: Optional[jax.Array] = None) -> jax.Array:
  """log_softmax(f_L) + beta * r (unnormalised log-probs; sampling renormalises)."""
  r = delta_log_ratio(rl_logits, ref_logits)
  if perm is not None:
    r = shuffle_delta(r, perm)
  return jax.nn.log_softmax(l_logits, axis=-1) + beta * r


@dataclasses.dataclass(frozen=True)
class DeltaPair:
  """The recorded delta: the small teacher's config and its (reference, RL) parameters."""
  cfg: lm_model.LMConfig
  ref_params: Any
  rl_params: Any

  def on(self, prompts: jax.Array, responses: jax.Array) -> jax.Array:
    """r_t(v) at every prefix of responses [B, R] after prompts: [B, R, V] (2 forward passes)."""
    ref = sampling.response_logits(self.cfg, self.ref_params, prompts, responses)
    rl = sampling.response_logits(self.cfg, self.rl_params, prompts, responses)
    return delta_log_ratio(rl, ref)


def delta_stepper(cfg_l: lm_model.LMConfig, params_l: Any, pair: DeltaPair, beta: float,
                  perm: Optional[jax.Array] = None) -> sampling.Stepper:
  """Stepper that samples from softmax(log pi_L + beta r) (decode-time delta)."""
  tokenizer.assert_same_vocab(cfg_l.vocab_size, pair.cfg.vocab_size)
  steppers = [sampling.lm_stepper(cfg_l, params_l), sampling.lm_stepper(pair.cfg, pair.ref_params),
              sampling.lm_stepper(pair.cfg, pair.rl_params)]
  return sampling.combine_steppers(
      steppers, lambda l, ref, rl: delta_decode_logits(l, ref, rl, beta, perm))


# ---- losses --------------------------------------------------------------------------------------
def top_k_log_probs(logits: jax.Array, k: int) -> tuple[jax.Array, jax.Array]:
  """Log-probabilities renormalised over the k largest logits: [..., V] -> ([..., V], [..., V]).

  Returns (logp_k, in_k): logp_k(v) = z_v - logsumexp_{u in K} z_u for v in K (the top-k set,
  chosen without gradient), -inf-free: outside K it is log_softmax(z) (finite, multiplied by
  0 wherever it is used), and in_k is the 0/1 mask of K. k <= 0 or k >= V: the full vocabulary.
  Ties at the k-th value are all kept (the set may hold more than k tokens).
  """
  v = logits.shape[-1]
  if k <= 0 or k >= v:
    return jax.nn.log_softmax(logits, axis=-1), jnp.ones_like(logits)
  z = jax.lax.stop_gradient(logits)
  kth = jax.lax.top_k(z, k)[0][..., -1:]
  in_k = (z >= kth).astype(logits.dtype)
  # Masked logsumexp: outside K the logits get -1e9 (not -inf: no NaN in the gradient).
  lse = jax.nn.logsumexp(jnp.where(in_k > 0, logits, -1e9), axis=-1, keepdims=True)
  logp_k = jnp.where(in_k > 0, logits - lse, jax.nn.log_softmax(logits, axis=-1))
  return logp_k, in_k


def direct_opd_loss(student_logits: jax.Array, delta: jax.Array, tokens: jax.Array,
                    start_logp: jax.Array, mask: jax.Array, alpha: jax.Array,
                    estimator: str = "full", top_k: int = 0) -> tuple[jax.Array, dict]:
  """Direct-OPD surrogate on the student's own rollouts.

  Args:
    student_logits: [B, R, V] pi_theta logits at the visited prefixes.
    delta: [B, R, V] r_t(v) at the same prefixes (constant).
    tokens: [B, R] sampled response tokens y_t.
    start_logp: [B, R] log pi_S(y_t) of the sampled tokens (k3 estimate of the KL, as in the
      paper's code) or [B, R, V] full log pi_S (exact reverse KL(pi_theta || pi_S) per state).
      The k3 term's gradient with samples held fixed is that of the *forward* KL(pi_S || pi_theta),
      which does not stop the linear E_p[r] term from concentrating on argmax_v r(v); measured on
      CarryAdd xs: reward 0.31 -> 0.81 -> 0.25 with kl_start 2.0 after 40 steps (alpha ~1).
    mask: [B, R] valid tokens.
    alpha: scalar KL coefficient.
    estimator: "full" (Rao-Blackwellised over the whole vocabulary) or "sampled" (only y_t).
    top_k: with estimator "full", k > 0 restricts the sum to the student's k most likely
      tokens K_t with pi_theta renormalised over them (the paper's k = 16 candidates):
        per_t = -sum_{v in K_t} sg(p_k(v) r_t(v)) log p_k(v),  p_k = softmax(z)|_K,
      whose gradient is grad E_{v~p_k}[r_t(v)]; 0 (default) or k >= V is the full vocabulary.
      The KL term stays exact over the vocabulary.
  Returns:
    (loss, aux) with aux["rbar"] = masked mean of E_{v~pi_theta}[r_t(v)] (drives adaptive alpha)
    and aux["kl_start"] = masked mean k3 estimate of KL(pi_theta || pi_S).
  """
  logp = jax.nn.log_softmax(student_logits, axis=-1)
  delta = jax.lax.stop_gradient(delta)
  logp_k, in_k = top_k_log_probs(student_logits, top_k if estimator == "full" else 0)
  w = jax.lax.stop_gradient(jnp.exp(logp_k) * in_k * delta)  # sg(p_k(v) r_v), 0 outside K
  if estimator == "full":
    per_t = -(w * logp_k).sum(-1)
  elif estimator == "sampled":
    per_t = -jnp.take_along_axis(delta, tokens[..., None], -1)[..., 0] * \
        lm_model.token_log_probs(student_logits, tokens)
  else:
    raise ValueError(f"estimator must be 'full' or 'sampled', got {estimator!r}")
  m = mask.astype(jnp.float32)
  pg = lm_grpo.masked_mean(per_t, m)
  start_logp = jax.lax.stop_gradient(start_logp)
  if start_logp.ndim == logp.ndim:  # full-vocabulary log pi_S: exact reverse KL per state
    kl_t = (jnp.exp(logp) * (logp - start_logp)).sum(-1)
  else:  # log pi_S(y_t) of the sampled tokens: k3 estimate (verl low_var_kl)
    kl_t = losses.kl_k3(lm_model.token_log_probs(student_logits, tokens), start_logp)
  kl = lm_grpo.masked_mean(kl_t, m)
  rbar = lm_grpo.masked_mean(w.sum(-1), m)
  return pg + alpha * kl, {"pg_loss": pg, "kl_start": kl, "rbar": rbar}


def adaptive_alpha(alpha: jax.Array, rbar: jax.Array, eps: float = 0.01, alpha_min: float = 0.5,
                   alpha_max: float = 2.5) -> jax.Array:
  """alpha_{m+1} = clip(alpha_m (1 + eps sign(rbar_m)), alpha_min, alpha_max) (paper Eq. 16)."""
  return jnp.clip(alpha * (1.0 + eps * jnp.sign(rbar)), alpha_min, alpha_max)


def vanilla_opd_loss(student_logits: jax.Array, teacher_logits: jax.Array,
                     mask: jax.Array) -> tuple[jax.Array, dict]:
  """Full-vocabulary reverse KL(pi_theta || pi_T) per visited state, token mean."""
  logp = jax.nn.log_softmax(student_logits, axis=-1)
  logq = jax.lax.stop_gradient(jax.nn.log_softmax(teacher_logits, axis=-1))
  kl = (jnp.exp(logp) * (logp - logq)).sum(-1)
  loss = lm_grpo.masked_mean(kl, mask)
  return loss, {"pg_loss": loss, "kl_start": jnp.zeros(()), "rbar": jnp.zeros(())}


# ---- training ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class DistillConfig:
  steps: int = 100
  prompts_per_step: int = 16
  rollouts_per_prompt: int = 4   # paper: n = 4
  lr: float = 1e-3
  temperature: float = 1.0
  alpha_init: float = 2.5        # release script: adaptive from 2.5 in [0.5, 2.5]
  alpha_eps: float = 0.01
  alpha_min: float = 0.5
  alpha_max: float = 2.5
  adaptive: bool = True
  estimator: str = "full"
  kl_estimator: str = "full"     # "full": exact reverse KL (V=32); "k3": paper's sampled k3
  max_grad_norm: float = 1.0
  top_k: int = 0                 # student top-k candidates (paper: 16); 0 = full vocabulary

  def __post_init__(self):
    for f in ("steps", "prompts_per_step", "rollouts_per_prompt"):
      if getattr(self, f) <= 0:
        raise ValueError(f"DistillConfig.{f} must be positive, got {getattr(self, f)}")
    if not 0 < self.alpha_min <= self.alpha_max:
      raise ValueError(f"need 0 < alpha_min <= alpha_max, got {self.alpha_min}, {self.alpha_max}")
    if self.top_k < 0:
      raise ValueError(f"DistillConfig.top_k must be >= 0 (0 = full vocabulary), got "
                       f"{self.top_k}")


class DistillState(NamedTuple):
  params: Any
  opt_state: Any
  alpha: jax.Array
  start_params: Any   # pi_S, the student's starting point (KL anchor)
  ref_params: Any     # teacher reference theta_ref
  rl_params: Any      # teacher RL policy theta_RL
  perm: jax.Array     # [V] vocabulary permutation applied to the delta (identity = no control)
  vanilla: jax.Array  # float scalar: 1 = vanilla OPD loss, 0 = Direct-OPD loss (see make_step)
  adaptive: jax.Array  # float scalar: 1 = alpha follows `adaptive_alpha`, 0 = alpha fixed


def make_step(cfg: lm_model.LMConfig, pair_cfg: lm_model.LMConfig, task, dcfg: DistillConfig):
  """Returns (init, step) for one student; step(state, key) -> (state, metrics) is pure.

  One program serves every mode; the mode is data in the state, so a single compilation per
  student size runs Direct-OPD, the shuffled control and vanilla OPD:
    init(params, ref_params, rl_params, mode="direct_opd", perm=None, adaptive=None)
  "direct_opd": delta r (state.perm = identity); "shuffled": r permuted by a fixed derangement
  `perm`; "vanilla_opd": reverse KL toward pi_RL (state.vanilla = 1). `adaptive` (default
  `dcfg.adaptive`) is data too (state.adaptive): False keeps alpha at `dcfg.alpha_init` for the
  whole run, which at alpha_init = 1 and pi_S = pi_ref makes the optimum exactly pi_RL (the
  consistency check; at alpha = 1 the Direct-OPD gradient is the vanilla-OPD gradient toward
  pi_RL, see tests). Both losses share the
  teacher's RL logits (vanilla needs only those; the delta adds the reference pass), and the
  unused one is multiplied by 0. All parameter sets travel in the `DistillState`.
  """
  tokenizer.assert_same_vocab(cfg.vocab_size, pair_cfg.vocab_size)
  opt = optax.chain(optax.clip_by_global_norm(dcfg.max_grad_norm), optax.adam(dcfg.lr))
  data = distributed.data_sharding(distributed.make_mesh())

  def init(params, ref_params, rl_params, mode: str = "direct_opd", perm=None,
           adaptive: Optional[bool] = None):
    if mode not in MODES:
      raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode == "shuffled" and perm is None:
      raise ValueError("mode='shuffled' needs a vocabulary permutation `perm`")
    perm = jnp.arange(cfg.vocab_size) if mode != "shuffled" else perm
    return DistillState(params, opt.init(params), jnp.float32(dcfg.alpha_init), params,
                        ref_params, rl_params, perm,
                        jnp.float32(1.0 if mode == "vanilla_opd" else 0.0),
                        jnp.float32(dcfg.adaptive if adaptive is None else bool(adaptive)))

  def step(state: DistillState, key):
    params, opt_state, alpha = state.params, state.opt_state, state.alpha
    ops, prompts, s = lm_grpo.sample_groups(cfg, params, task, key, dcfg.prompts_per_step,
                                            dcfg.rollouts_per_prompt, dcfg.temperature)
    prompts, tokens = (jax.lax.with_sharding_constraint(x, data) for x in (prompts, s.tokens))
    start_logits = sampling.response_logits(cfg, state.start_params, prompts, tokens)
    start_logp = (jax.nn.log_softmax(start_logits, -1) if dcfg.kl_estimator == "full"
                  else lm_model.token_log_probs(start_logits, tokens))
    rl_logits = sampling.response_logits(pair_cfg, state.rl_params, prompts, tokens)
    ref_logits = sampling.response_logits(pair_cfg, state.ref_params, prompts, tokens)
    delta = shuffle_delta(delta_log_ratio(rl_logits, ref_logits), state.perm)
    v = state.vanilla

    def loss_fn(p):
      logits = sampling.response_logits(cfg, p, prompts, tokens)
      l_d, aux = direct_opd_loss(logits, delta, tokens, start_logp, s.mask, alpha,
                                 dcfg.estimator, dcfg.top_k)
      l_v, _ = vanilla_opd_loss(logits, rl_logits, s.mask)
      return (1.0 - v) * l_d + v * l_v, aux

    (loss, aux), g = jax.value_and_grad(loss_fn, has_aux=True)(params)
    upd, opt_state = opt.update(g, opt_state, params)
    params = optax.apply_updates(params, upd)
    new_alpha = adaptive_alpha(alpha, aux["rbar"], dcfg.alpha_eps, dcfg.alpha_min,
                               dcfg.alpha_max)
    alpha = jnp.where((v > 0) | (state.adaptive <= 0), alpha, new_alpha)
    rewards = task.reward(ops, tokens)
    new = state._replace(params=params, opt_state=opt_state, alpha=alpha)
    return new, {"loss": loss, "alpha": alpha, "reward": rewards.mean(), **aux}

  return init, step


def train(cfg: lm_model.LMConfig, start_params: Any, pair: DeltaPair, task, dcfg: DistillConfig,
          keys: jax.Array, mode: str = "direct_opd", perm: Optional[jax.Array] = None,
          rl_params_per_seed: bool = True, start_per_seed: bool = False, chunk: int = 50,
          progress: bool = True, desc: str = "", timing: Optional[dict] = None,
          adaptive: Optional[bool] = None) -> tuple[Any, dict]:
  """Distils into `start_params` for each seed in keys [S, 2] (vmapped).

  If `rl_params_per_seed`, pair.rl_params has a leading seed axis (seed i's student uses seed i's
  RL teacher); if `start_per_seed`, so do start_params and pair.ref_params (one pretrained
  family per seed). mode "shuffled" needs `perm`. `timing` as in `pretrain.run_chunked`.
  `adaptive` overrides `dcfg.adaptive` (None: use it); it is data, so adaptive and fixed-alpha
  runs of one student size share one compilation.
  Returns (student params stacked over seeds, metrics {name: [S, steps]}).
  """
  n = keys.shape[0]
  init, step = make_step(cfg, pair.cfg, task, dcfg)
  bcast = lambda t: jax.tree.map(lambda x: jnp.broadcast_to(x, (n,) + x.shape), t)
  rl = pair.rl_params if rl_params_per_seed else bcast(pair.rl_params)
  start = start_params if start_per_seed else bcast(start_params)
  ref = pair.ref_params if start_per_seed else bcast(pair.ref_params)
  state = jax.vmap(lambda p, r, q: init(p, r, q, mode, perm, adaptive))(start, ref, rl)
  state, m = lm_grpo.run_seeds(step, state, keys, dcfg.steps, chunk,
                               desc or f"{mode} {cfg.name}", progress, timing)
  return state.params, m


def train_flops(cfg: lm_model.LMConfig, pair_cfg: lm_model.LMConfig, task,
                dcfg: DistillConfig, mode: str = "direct_opd") -> float:
  """Analytic FLOPs of one distillation run: student sampling, start-point and teacher
  forwards (2 teacher passes for the delta, 1 for vanilla OPD), student forward + backward."""
  ctx = task.prompt_len + task.response_len
  fs = lm_model.forward_flops_per_token(cfg, ctx)
  ft = lm_model.forward_flops_per_token(pair_cfg, ctx)
  n = dcfg.prompts_per_step * dcfg.rollouts_per_prompt
  teacher_passes = 1 if mode == "vanilla_opd" else 2  # what each mode needs (the shared
  per_step = n * ctx * (fs + fs + teacher_passes * ft + 3 * fs)  # program runs 2 for all)
  return float(per_step * dcfg.steps)


def kl_to(cfg: lm_model.LMConfig, params: Any, start_params: Any, task, operands: jax.Array,
          key: jax.Array, temperature: float = 1.0) -> jax.Array:
  """Exact per-token KL(pi_theta || pi_S) (full vocabulary) on pi_theta's own samples,
  summed over the response (sequence-level KL estimate), averaged over problems."""
  prompts = task.prompts(operands)
  s = sampling.sample(sampling.lm_stepper(cfg, params), prompts, key, task.response_len,
                      temperature=temperature)
  lp = jax.nn.log_softmax(sampling.response_logits(cfg, params, prompts, s.tokens), -1)
  lq = jax.nn.log_softmax(sampling.response_logits(cfg, start_params, prompts, s.tokens), -1)
  kl_t = (jnp.exp(lp) * (lp - lq)).sum(-1)
  return (kl_t * s.mask).sum(-1).mean()


def evaluate(cfg: lm_model.LMConfig, params: Any, start_params: Any, pair: DeltaPair,
             beta: jax.Array, perm: jax.Array, task, operands: jax.Array, key: jax.Array,
             temperature: float = 1.0) -> tuple[jax.Array, jax.Array]:
  """(accuracy, sequence-level KL(pi~ || pi_S)) of pi~ = softmax(log pi_theta + beta r_perm).

  One program for every evaluation of a size: beta = 0 gives the plain model pi_theta (base,
  distilled or GRPO; the teacher passes are then unused), beta > 0 the decode-time delta
  (perm = identity) or its shuffled control. beta and perm are traced, so they do not trigger
  recompilation. The KL is exact over the vocabulary per visited state (at temperature 1),
  summed over the response, averaged over problems, on pi~'s own samples.
  """
  prompts = task.prompts(operands)
  st = delta_stepper(cfg, params, pair, beta, perm)
  s = sampling.sample(st, prompts, key, task.response_len, temperature=temperature)
  acc = task.reward(operands, s.tokens).mean()
  lt = jax.nn.log_softmax(sampling.response_logits(cfg, params, prompts, s.tokens), -1)
  lp = jax.nn.log_softmax(lt + beta * shuffle_delta(pair.on(prompts, s.tokens), perm), -1)
  lq = jax.nn.log_softmax(sampling.response_logits(cfg, start_params, prompts, s.tokens), -1)
  kl_t = (jnp.exp(lp) * (lp - lq)).sum(-1)
  return acc, (kl_t * s.mask).sum(-1).mean()
