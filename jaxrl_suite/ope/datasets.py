"""Logged trajectories in RLDS format via tensorflow-datasets (array_record, no TensorFlow).

RLDS schema (https://github.com/google-research/rlds), without the `rlds` package (it needs TF):
an episode is {"steps": Dataset(step), "episode_id": int64}; step t holds
  observation o_t (float32[obs_dim]), action a_t (int64), reward r_t (float32, after a_t),
  discount (float32), is_first, is_last, is_terminal (bool), behavior_prob μ(a_t|o_t) (float32,
  an extra RLDS step field for IS/DR).
An episode with T transitions stores T + 1 steps; the last one (is_last=True) carries only the
final observation (action 0, reward 0, discount 0 if terminal else 1). is_terminal=False on the
last step means time-limit truncation: FORE then bootstraps from the final observation.

Standard RLDS episodes (any producer) load too: `episodes_to_transitions` takes the behaviour
probabilities from a named step field (`behavior_prob_key`, default "behavior_prob"; a nested
field as "infos/behavior_prob") or, when the dataset has none, from a given behaviour policy
(`behavior_probs_fn`); dict observations are flattened in sorted key order (or pass
`observation_fn`). Every step field is validated (shape, dtype, action range) with an error that
names the field and the episode. `write_rlds` infers the TFDS features from the first episode,
so any RLDS-shaped schema (dict observations, no behaviour field) round-trips.

Pipeline: `rollout_gymnax` (behaviour policy on a gymnax env, jitted) -> `write_rlds` (a
`GeneratorBasedBuilder` with file_format="array_record", written under a local data_dir; nothing
is downloaded) -> `read_rlds` (`tfds.builder_from_directory(...).as_data_source`, random access,
no TF) -> `episodes_to_transitions` -> `fore.fore(...)` with trajectory clusters and an estimated ν0.
Building a TFDS dataset needs `importlib_resources` installed (undeclared tfds dependency).
"""

from __future__ import annotations

import functools
import os
from typing import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

BUILDER_NAME = "jaxrl_ope_episodes"


# ----------------------------------------------------------------------------------------------
# policies and features for CartPole-like discrete-action envs
# ----------------------------------------------------------------------------------------------
def linear_softmax_probs(params, obs):
  """π(a|o) = softmax over actions of [-h, h] with h = temperature * (weights · o) (2 actions).

  params = (weights (obs_dim,), temperature ()) -- a pytree, so one compiled rollout serves every
  policy of this family. CartPole heuristic: weights = (0.1, 0.5, 10, 2) pushes toward the lean.
  Returns (..., 2).
  """
  w, temperature = params
  h = temperature * (obs @ jnp.asarray(w, obs.dtype))
  return jax.nn.softmax(jnp.stack([-h, h], -1), -1)


def linear_softmax_policy(weights: np.ndarray, temperature: float) -> Callable:
  """Closure form of `linear_softmax_probs`: probs_fn(obs) -> (..., 2). Carries `.params`."""
  params = (jnp.asarray(weights, jnp.float32), jnp.asarray(temperature, jnp.float32))
  fn = functools.partial(_apply_probs, params)
  fn.params = params
  return fn


def _apply_probs(params, obs):
  return linear_softmax_probs(params, obs)


CARTPOLE_WEIGHTS = np.array([0.1, 0.5, 10.0, 2.0], np.float32)


def poly_action_features(obs, action, num_actions: int = 2):
  """φ(o, a) = onehot(a) ⊗ [1, o, o²]: (..., num_actions * (1 + 2 obs_dim))."""
  base = jnp.concatenate([jnp.ones(obs.shape[:-1] + (1,), obs.dtype), obs, obs ** 2], -1)
  onehot = jax.nn.one_hot(action, num_actions, dtype=obs.dtype)
  return (onehot[..., :, None] * base[..., None, :]).reshape(obs.shape[:-1] + (-1,))


# ----------------------------------------------------------------------------------------------
# rollouts
# ----------------------------------------------------------------------------------------------
def rollout_gymnax(key: jax.Array, env, env_params, probs_fn: Callable, num_episodes: int,
                   max_steps: int) -> dict:
  """Runs `num_episodes` episodes of a behaviour policy (vmapped, one lax.scan of max_steps).

  Each episode stops at its first done (terminated or truncated); steps after are masked.
  `probs_fn(obs) -> (..., num_actions)`; policies built by `linear_softmax_policy` share one
  compiled rollout (their parameters are traced arguments, not constants).

  Returns:
    dict of numpy arrays: obs (E, T+1, obs_dim) (obs[:, t] for t <= length; obs[:, length] is the
    final observation), actions, rewards, behavior_probs (E, T), length (E,), terminated (E,).
  """
  params = getattr(probs_fn, "params", None)
  if params is not None:
    fn = _compiled_rollout(env, linear_softmax_probs, num_episodes, max_steps)
  else:
    fn = _compiled_rollout(env, lambda _, o: probs_fn(o), num_episodes, max_steps)
  o, a, r, bp, length, term = fn(key, env_params, params)
  return dict(obs=np.asarray(o, np.float32), actions=np.asarray(a, np.int64),
              rewards=np.asarray(r, np.float32), behavior_probs=np.asarray(bp, np.float32),
              length=np.asarray(length), terminated=np.asarray(term))


@functools.lru_cache(maxsize=16)
def _compiled_rollout(env, probs, num_episodes: int, max_steps: int):
  def one(k, env_params, pparams):
    k0, k = jax.random.split(k)
    obs, state = env.reset(k0, env_params)

    def step(carry, kk):
      obs, state, alive, term = carry
      ka, ks = jax.random.split(kk)
      p = probs(pparams, obs)
      a = jax.random.categorical(ka, jnp.log(p))
      nobs, nstate, r, terminated, truncated, info = env.step(ks, state, a, env_params)
      done = jnp.logical_or(terminated, truncated)
      out = (obs, a, r.astype(jnp.float32), p[a], alive, info["final_observation"])
      new_term = jnp.where(alive, terminated, term)
      return (nobs, nstate, alive & ~done, new_term), out

    init = (obs, state, jnp.array(True), jnp.array(False))
    (_, _, _, term), (o, a, r, bp, valid, fo) = jax.lax.scan(step, init, jax.random.split(k, max_steps))
    length = valid.sum()
    # obs[t] for t < length, then the final (pre-reset) observation at index length
    obs_all = jnp.concatenate([o, o[-1:]], 0).at[length].set(fo[jnp.maximum(length - 1, 0)])
    return obs_all, a, r, bp, length, term

  def run(key, env_params, pparams):
    return jax.vmap(one, in_axes=(0, None, None))(jax.random.split(key, num_episodes), env_params, pparams)

  return jax.jit(run)


def rollouts_to_episodes(ro: dict) -> list[dict]:
  """Converts `rollout_gymnax` output to RLDS episode dicts (T + 1 steps each)."""
  episodes = []
  for i, length in enumerate(ro["length"].tolist()):
    t1 = length + 1
    is_last = np.zeros(t1, bool)
    is_last[-1] = True
    is_first = np.zeros(t1, bool)
    is_first[0] = True
    is_term = np.zeros(t1, bool)
    is_term[-1] = bool(ro["terminated"][i])
    pad = lambda x, v: np.concatenate([x[:length], np.array([v], x.dtype)])
    discount = np.ones(t1, np.float32)
    discount[-1] = 0.0 if is_term[-1] else 1.0
    steps = dict(observation=ro["obs"][i, :t1], action=pad(ro["actions"][i], 0),
                 reward=pad(ro["rewards"][i], 0.0), discount=discount, is_first=is_first,
                 is_last=is_last, is_terminal=is_term,
                 behavior_prob=pad(ro["behavior_probs"][i], 1.0))
    episodes.append(dict(steps=steps, episode_id=i))
  return episodes


# ----------------------------------------------------------------------------------------------
# TFDS builder (array_record, no TF)
# ----------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def _builder_class():
  import tensorflow_datasets as tfds  # heavy import, deferred

  class JaxrlOpeEpisodes(tfds.core.GeneratorBasedBuilder):
    """RLDS-shaped logged episodes, generated in memory (no download)."""
    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "RLDS episodes from a gymnax behaviour-policy rollout."}

    def __init__(self, *, episodes: Sequence[dict] = (), step_spec: dict | None = None,
                 **kwargs):
      self._episodes = list(episodes)
      self._step_spec = step_spec or {}
      super().__init__(**kwargs)

    def _info(self):
      f = tfds.features

      def feat(spec):
        if isinstance(spec, dict):
          return f.FeaturesDict({k: feat(v) for k, v in spec.items()})
        shape, dtype = spec
        return f.Scalar(dtype=dtype) if shape == () else f.Tensor(shape=shape, dtype=dtype)

      return self.dataset_info_from_configs(
          features=f.FeaturesDict({"steps": f.Dataset(feat(self._step_spec)),
                                   "episode_id": f.Scalar(dtype=np.int64)}),
          description="Logged behaviour-policy episodes in RLDS format for off-policy evaluation.")

    def _split_generators(self, dl_manager):
      del dl_manager  # nothing is downloaded
      return {"train": self._generate_examples()}

    def _generate_examples(self):
      for ep in self._episodes:
        yield int(ep["episode_id"]), ep

  return JaxrlOpeEpisodes


def _step_spec(steps: dict) -> dict:
  """TFDS feature spec {field: (per-step shape, dtype) or nested dict} of one episode's steps."""
  out = {}
  for k, v in steps.items():
    if isinstance(v, dict):
      out[k] = _step_spec(v)
    else:
      a = np.asarray(v)
      out[k] = (tuple(a.shape[1:]), a.dtype)
  return out


def write_rlds(episodes: Sequence[dict], data_dir: str) -> str:
  """Writes episodes as an array_record TFDS dataset under `data_dir`; returns the builder dir.

  The step features (names, shapes, dtypes, nesting) are inferred from the first episode, so
  both this module's episodes and standard RLDS ones (dict observations, no behaviour field)
  can be written.
  """
  import tensorflow_datasets as tfds
  if not episodes:
    raise ValueError("no episodes to write")
  builder = _builder_class()(episodes=episodes, step_spec=_step_spec(episodes[0]["steps"]),
                             data_dir=data_dir, file_format="array_record")
  builder.download_and_prepare(
      download_config=tfds.download.DownloadConfig(download_mode=tfds.GenerateMode.REUSE_DATASET_IF_EXISTS))
  return builder.data_dir


def _stack_steps(steps):
  """A nested Dataset read back as a sequence of (nested) step dicts -> dict of stacked arrays."""
  if isinstance(steps, dict):
    return {k: _stack_steps(v) if isinstance(v, dict) else np.asarray(v) for k, v in steps.items()}
  first = steps[0]
  return {k: (_stack_steps([s[k] for s in steps]) if isinstance(first[k], dict)
              else np.stack([np.asarray(s[k]) for s in steps])) for k in first}


def read_rlds(builder_dir: str, split: str = "train") -> list[dict]:
  """Reads every episode back (random-access ArrayRecord data source, no TF)."""
  import tensorflow_datasets as tfds
  if not os.path.isdir(builder_dir):
    raise FileNotFoundError(f"no TFDS dataset at {builder_dir}")
  src = tfds.builder_from_directory(builder_dir).as_data_source(split=split)
  out = []
  for i in range(len(src)):
    ep = src[i]
    out.append(dict(steps=_stack_steps(ep["steps"]), episode_id=int(ep["episode_id"])))
  return sorted(out, key=lambda e: e["episode_id"])


# ----------------------------------------------------------------------------------------------
# episodes -> FORE inputs
# ----------------------------------------------------------------------------------------------
def _field(steps: dict, key: str):
  """steps[key] with "a/b" addressing nested step dicts; None when absent."""
  cur = steps
  for part in key.split("/"):
    if not isinstance(cur, dict) or part not in cur:
      return None
    cur = cur[part]
  return cur


def flatten_observation(obs) -> np.ndarray:
  """(T+1, ...) array, or a dict of them (nested ok) -> float (T+1, obs_dim), dict keys sorted."""
  if isinstance(obs, dict):
    parts = [flatten_observation(obs[k]) for k in sorted(obs)]
    if not parts:
      raise ValueError("observation is an empty dict")
    lens = {p.shape[0] for p in parts}
    if len(lens) != 1:
      raise ValueError(f"observation dict fields have different step counts {sorted(lens)}")
    return np.concatenate(parts, axis=1)
  a = np.asarray(obs)
  if a.ndim < 1 or not (np.issubdtype(a.dtype, np.number) or a.dtype == np.bool_):
    raise ValueError(f"observation must be numeric with a leading step axis; got dtype {a.dtype}, "
                     f"shape {a.shape}")
  return a.reshape(a.shape[0], -1).astype(np.float32)


def episodes_to_transitions(episodes: Sequence[dict], feature_fn: Callable, target_probs_fn: Callable,
                            num_actions: int = 2, *, behavior_prob_key: str = "behavior_prob",
                            behavior_probs_fn: Callable | None = None,
                            observation_fn: Callable | None = None) -> dict:
  """Flattens RLDS episodes into FORE arrays, validating every field.

  Args:
    episodes: RLDS episodes {"steps": {observation, action, reward, is_terminal, ...},
      "episode_id"?}; T + 1 steps for T transitions (the last carries the final observation).
    feature_fn: (obs (n, obs_dim), action (n,)) -> φ (n, d).
    target_probs_fn: obs (n, obs_dim) -> π(.|o) (n, num_actions).
    num_actions: actions are integers in [0, num_actions).
    behavior_prob_key: step field with μ(a_t|o_t) ("a/b" for nested fields). Used when present.
    behavior_probs_fn: behaviour policy obs -> (n, num_actions), used when the field is absent
      (standard RLDS datasets do not log μ). Neither -> ValueError naming the field.
    observation_fn: observation field (array or dict) -> (T+1, obs_dim); default
      `flatten_observation` (dict observations concatenated in sorted key order).

  Returns:
    dict(phi (n, d), phi_next (n, d) = (1 - terminal') Σ_a π(a|o') φ(o', a), rewards (n,),
    cluster_ids (n,) episode ids, nu0 (E, d) samples φ_π(o_0) (estimated ν0),
    pi_probs / mu_probs (n,) of the logged action, step (n,) time index).

  Raises:
    ValueError naming the episode and field: missing fields, step counts that disagree,
    non-integer or out-of-range actions, non-finite rewards, behaviour probabilities outside
    (0, 1] or missing.
  """
  if not episodes:
    raise ValueError("no episodes")
  if num_actions < 1:
    raise ValueError(f"num_actions must be >= 1, got {num_actions}")
  obs_fn = observation_fn or flatten_observation
  obs, nobs, act, rew, term, cid, mu, tstep, first = [], [], [], [], [], [], [], [], []
  mu_from_policy = []
  for e_i, ep in enumerate(episodes):
    if "steps" not in ep or not isinstance(ep["steps"], dict):
      raise ValueError(f"episode {e_i}: missing 'steps' dict (RLDS episode schema)")
    s = ep["steps"]
    eid = ep.get("episode_id", e_i)
    where = f"episode {e_i} (episode_id {eid})"
    for k in ("observation", "action", "reward", "is_terminal"):
      if k not in s:
        raise ValueError(f"{where}: steps has no '{k}' field (have {sorted(s)})")
    o = obs_fn(s["observation"])
    t1 = o.shape[0]
    t = t1 - 1
    for k in ("action", "reward", "is_terminal"):
      if np.shape(s[k])[:1] != (t1,) or np.ndim(s[k]) != 1:
        raise ValueError(f"{where}: steps/{k} has shape {np.shape(s[k])}, expected ({t1},) "
                         f"(one per step, like steps/observation)")
    if t < 1:
      continue
    a = np.asarray(s["action"])[:-1]
    if not (np.issubdtype(a.dtype, np.integer) or
            (np.issubdtype(a.dtype, np.floating) and np.all(a == np.round(a)))):
      raise ValueError(f"{where}: steps/action must hold integer actions, got dtype {a.dtype}")
    if a.size and (a.min() < 0 or a.max() >= num_actions):
      bad = int(np.argmax((a < 0) | (a >= num_actions)))
      raise ValueError(f"{where}: steps/action[{bad}] = {a[bad]} is outside [0, {num_actions}) "
                       f"(num_actions={num_actions})")
    b = _field(s, behavior_prob_key)
    if b is not None:
      b = np.asarray(b, np.float64)
      if b.shape != (t1,):
        raise ValueError(f"{where}: steps/{behavior_prob_key} has shape {b.shape}, expected ({t1},)")
      b = b[:-1]
      if not np.all((b > 0) & (b <= 1)):
        bad = int(np.argmax(~((b > 0) & (b <= 1))))
        raise ValueError(f"{where}: steps/{behavior_prob_key}[{bad}] = {b[bad]} is not a "
                         "probability in (0, 1]")
    elif behavior_probs_fn is None:
      raise ValueError(f"{where}: steps has no behaviour-probability field '{behavior_prob_key}' "
                       "(standard RLDS does not log mu(a|o)); pass behavior_prob_key=<field> or "
                       "behavior_probs_fn=<behaviour policy>")
    obs.append(o[:-1])
    nobs.append(o[1:])
    act.append(a.astype(np.int64))
    rew.append(np.asarray(s["reward"], np.float32)[:-1])
    tn = np.zeros(t, bool)
    tn[-1] = bool(np.asarray(s["is_terminal"])[-1])
    term.append(tn)
    cid.append(np.full(t, eid))
    mu.append(b if b is not None else np.full(t, np.nan))
    mu_from_policy.append(np.full(t, b is None))
    tstep.append(np.arange(t))
    first.append(o[0])
  if not obs:
    raise ValueError("no episode has a transition (every episode has < 2 steps)")
  cat = lambda xs: jnp.asarray(np.concatenate(xs))
  obs, nobs, act, rew, term = cat(obs), cat(nobs), cat(act), cat(rew), cat(term)
  if not bool(jnp.all(jnp.isfinite(rew))):
    raise ValueError("steps/reward contains NaN/inf")
  mu = np.concatenate(mu)
  from_pol = np.concatenate(mu_from_policy)
  if from_pol.any():
    pb = np.asarray(behavior_probs_fn(obs))
    if pb.shape != (obs.shape[0], num_actions):
      raise ValueError(f"behavior_probs_fn returned shape {pb.shape}, expected "
                       f"({obs.shape[0]}, {num_actions})")
    mu = np.where(from_pol, pb[np.arange(len(mu)), np.asarray(act)], mu)
  pn = target_probs_fn(nobs)
  phi_next = sum(pn[:, a, None] * feature_fn(nobs, jnp.full(nobs.shape[:1], a)) for a in range(num_actions))
  phi_next = phi_next * (1.0 - term[:, None].astype(phi_next.dtype))
  o0 = jnp.asarray(np.stack(first))
  p0 = target_probs_fn(o0)
  nu0 = sum(p0[:, a, None] * feature_fn(o0, jnp.full(o0.shape[:1], a)) for a in range(num_actions))
  pi_taken = jnp.take_along_axis(target_probs_fn(obs), act[:, None], 1)[:, 0]
  return dict(phi=feature_fn(obs, act), phi_next=phi_next, rewards=rew, cluster_ids=cat(cid),
              nu0=nu0, pi_probs=pi_taken, mu_probs=jnp.asarray(mu, jnp.float32), step=cat(tstep))


def monte_carlo_value(key, env, env_params, probs_fn, gamma: float, num_episodes: int,
                      max_steps: int) -> tuple[float, float]:
  """Ground truth by rollouts of the target policy: (mean discounted return, its standard error)."""
  ro = rollout_gymnax(key, env, env_params, probs_fn, num_episodes, max_steps)
  valid = np.arange(max_steps)[None, :] < ro["length"][:, None]
  g = (ro["rewards"] * valid * gamma ** np.arange(max_steps)[None, :]).sum(1)
  return float(g.mean()), float(g.std(ddof=1) / np.sqrt(len(g)))
