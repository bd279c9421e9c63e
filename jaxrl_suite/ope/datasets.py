"""Logged trajectories in RLDS format via tensorflow-datasets (array_record, no TensorFlow).

RLDS schema (https://github.com/google-research/rlds), without the `rlds` package (it needs TF):
an episode is {"steps": Dataset(step), "episode_id": int64}; step t holds
  observation o_t (float32[obs_dim]), action a_t (int64), reward r_t (float32, after a_t),
  discount (float32), is_first, is_last, is_terminal (bool), behavior_prob μ(a_t|o_t) (float32,
  an extra RLDS step field for IS/DR).
An episode with T transitions stores T + 1 steps; the last one (is_last=True) carries only the
final observation (action 0, reward 0, discount 0 if terminal else 1). is_terminal=False on the
last step means time-limit truncation: FORE then bootstraps from the final observation.

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

    def __init__(self, *, episodes: Sequence[dict] = (), obs_dim: int = 4, **kwargs):
      self._episodes = list(episodes)
      self._obs_dim = int(obs_dim)
      super().__init__(**kwargs)

    def _info(self):
      f = tfds.features
      step = f.FeaturesDict({
          "observation": f.Tensor(shape=(self._obs_dim,), dtype=np.float32),
          "action": f.Scalar(dtype=np.int64),
          "reward": f.Scalar(dtype=np.float32),
          "discount": f.Scalar(dtype=np.float32),
          "is_first": f.Scalar(dtype=np.bool_),
          "is_last": f.Scalar(dtype=np.bool_),
          "is_terminal": f.Scalar(dtype=np.bool_),
          "behavior_prob": f.Scalar(dtype=np.float32),
      })
      return self.dataset_info_from_configs(
          features=f.FeaturesDict({"steps": f.Dataset(step), "episode_id": f.Scalar(dtype=np.int64)}),
          description="Logged behaviour-policy episodes in RLDS format for off-policy evaluation.")

    def _split_generators(self, dl_manager):
      del dl_manager  # nothing is downloaded
      return {"train": self._generate_examples()}

    def _generate_examples(self):
      for ep in self._episodes:
        yield int(ep["episode_id"]), ep

  return JaxrlOpeEpisodes


def write_rlds(episodes: Sequence[dict], data_dir: str) -> str:
  """Writes episodes as an array_record TFDS dataset under `data_dir`; returns the builder dir."""
  import tensorflow_datasets as tfds
  if not episodes:
    raise ValueError("no episodes to write")
  obs_dim = int(np.shape(episodes[0]["steps"]["observation"])[-1])
  builder = _builder_class()(episodes=episodes, obs_dim=obs_dim, data_dir=data_dir,
                             file_format="array_record")
  builder.download_and_prepare(
      download_config=tfds.download.DownloadConfig(download_mode=tfds.GenerateMode.REUSE_DATASET_IF_EXISTS))
  return builder.data_dir


def read_rlds(builder_dir: str, split: str = "train") -> list[dict]:
  """Reads every episode back (random-access ArrayRecord data source, no TF)."""
  import tensorflow_datasets as tfds
  if not os.path.isdir(builder_dir):
    raise FileNotFoundError(f"no TFDS dataset at {builder_dir}")
  src = tfds.builder_from_directory(builder_dir).as_data_source(split=split)
  out = []
  for i in range(len(src)):
    ep = src[i]
    steps = ep["steps"]
    if not isinstance(steps, dict):  # nested Dataset comes back as a sequence of step dicts
      steps = {k: np.stack([np.asarray(s[k]) for s in steps]) for k in steps[0]}
    out.append(dict(steps={k: np.asarray(v) for k, v in steps.items()},
                    episode_id=int(ep["episode_id"])))
  return sorted(out, key=lambda e: e["episode_id"])


# ----------------------------------------------------------------------------------------------
# episodes -> FORE inputs
# ----------------------------------------------------------------------------------------------
def episodes_to_transitions(episodes: Sequence[dict], feature_fn: Callable, target_probs_fn: Callable,
                            num_actions: int = 2) -> dict:
  """Flattens RLDS episodes into FORE arrays.

  Returns:
    dict(phi (n, d), phi_next (n, d) = (1 - terminal') Σ_a π(a|o') φ(o', a), rewards (n,),
    cluster_ids (n,) episode ids, nu0 (E, d) samples φ_π(o_0) (estimated ν0),
    pi_probs / mu_probs (n,) of the logged action, step (n,) time index).
  """
  if not episodes:
    raise ValueError("no episodes")
  obs, nobs, act, rew, term, cid, mu, tstep, first = [], [], [], [], [], [], [], [], []
  for ep in episodes:
    s = ep["steps"]
    t = len(s["reward"]) - 1
    if t < 1:
      continue
    obs.append(s["observation"][:-1])
    nobs.append(s["observation"][1:])
    act.append(s["action"][:-1])
    rew.append(s["reward"][:-1])
    tn = np.zeros(t, bool)
    tn[-1] = bool(s["is_terminal"][-1])
    term.append(tn)
    cid.append(np.full(t, ep["episode_id"]))
    mu.append(s["behavior_prob"][:-1])
    tstep.append(np.arange(t))
    first.append(s["observation"][0])
  cat = lambda xs: jnp.asarray(np.concatenate(xs))
  obs, nobs, act, rew, term = cat(obs), cat(nobs), cat(act), cat(rew), cat(term)
  if not bool(jnp.all(jnp.isfinite(rew))):
    raise ValueError("episode rewards contain NaN/inf")
  pn = target_probs_fn(nobs)
  phi_next = sum(pn[:, a, None] * feature_fn(nobs, jnp.full(nobs.shape[:1], a)) for a in range(num_actions))
  phi_next = phi_next * (1.0 - term[:, None].astype(phi_next.dtype))
  o0 = jnp.asarray(np.stack(first))
  p0 = target_probs_fn(o0)
  nu0 = sum(p0[:, a, None] * feature_fn(o0, jnp.full(o0.shape[:1], a)) for a in range(num_actions))
  pi_taken = jnp.take_along_axis(target_probs_fn(obs), act[:, None], 1)[:, 0]
  return dict(phi=feature_fn(obs, act), phi_next=phi_next, rewards=rew, cluster_ids=cat(cid),
              nu0=nu0, pi_probs=pi_taken, mu_probs=cat(mu), step=cat(tstep))


def monte_carlo_value(key, env, env_params, probs_fn, gamma: float, num_episodes: int,
                      max_steps: int) -> tuple[float, float]:
  """Ground truth by rollouts of the target policy: (mean discounted return, its standard error)."""
  ro = rollout_gymnax(key, env, env_params, probs_fn, num_episodes, max_steps)
  valid = np.arange(max_steps)[None, :] < ro["length"][:, None]
  g = (ro["rewards"] * valid * gamma ** np.arange(max_steps)[None, :]).sum(1)
  return float(g.mean()), float(g.std(ddof=1) / np.sqrt(len(g)))
