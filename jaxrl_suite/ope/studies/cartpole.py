r"""Section E: CartPole-v1 behaviour data through RLDS and back into FORE, against a Monte-Carlo
truth.

Behaviour mu and target pi are linear-softmax policies on datasets.CARTPOLE_WEIGHTS at
temperatures cfg.cartpole_mu_temp / cfg.cartpole_pi_temp. `cartpole_rlds(cfg, key, data_dir)`:
  1. rolls out cfg.cartpole_episodes episodes of mu (gymnax), writes them as an RLDS-shaped
     array_record TFDS dataset under `data_dir` (the caller names it and clears it first), reads
     them back and checks the round trip is bit-identical;
  2. FORE on polynomial state-action features with a cluster-robust (per-episode) sandwich SE
     and the estimated initial feature mean nu0 (fore.fore), plus a cluster Poisson-bootstrap
     percentile CI (cfg.cartpole_boot replicates);
  3. WIS, PDIS, WPDIS on the episodes padded to the longest length T ([E, T], padding has
     pi = mu = 1 and mask 0);
  4. the Monte-Carlo values of pi (truth) and mu over cfg.cartpole_mc_episodes episodes at
     discount cfg.cartpole_gamma.
Returns a dict of floats (see the keys); the polynomial features do not contain CartPole's
ratio, so FORE's error here is realizability, not I/O.
"""
from __future__ import annotations

import time
import warnings

import gymnax
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.ope import baselines as B
from jaxrl_suite.ope import datasets as D
from jaxrl_suite.ope import fore as F


def _f64(a):
  return jnp.asarray(a, jnp.float64)


def _roundtrip(eps: list, data_dir: str) -> tuple:
  """Writes episodes to RLDS under data_dir and reads them back:
  (episodes read, builder dir, seconds, identical?)."""
  t0 = time.time()
  bdir = D.write_rlds(eps, data_dir)
  back = D.read_rlds(bdir)
  io_s = time.time() - t0
  same = len(back) == len(eps) and all(
      np.array_equal(a["steps"][f], b["steps"][f]) for a, b in zip(eps, back) for f in a["steps"])
  return back, bdir, io_s, same


def _padded_is_args(back: list, tr: dict, gamma: float) -> tuple:
  """(rewards, pi probs, mu probs [E, T], mask [E, T] bool, gamma) for the trajectory IS
  estimators; padded steps have probabilities 1 (ratio 1) and mask 0."""
  E = len(back)
  T = max(len(e["steps"]["reward"]) - 1 for e in back)
  rew, pp, mp, msk = (np.zeros((E, T)) for _ in range(4))
  ids, stp = np.asarray(tr["cluster_ids"]), np.asarray(tr["step"])
  rew[ids, stp] = np.asarray(tr["rewards"])
  pp[ids, stp] = np.asarray(tr["pi_probs"])
  mp[ids, stp] = np.asarray(tr["mu_probs"])
  msk[ids, stp] = 1
  pp[msk == 0] = 1.0
  mp[msk == 0] = 1.0
  return (_f64(rew), _f64(pp), _f64(mp), jnp.asarray(msk, bool), gamma)


def _fore_estimates(cfg, tr: dict, key: jax.Array) -> tuple:
  """(fore.fore result, cluster Poisson-bootstrap dict) on the transitions tr."""
  ids = np.asarray(tr["cluster_ids"])
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")   # ill-conditioning is reported in the record (cond_A)
    res = F.fore(_f64(tr["phi"]), _f64(tr["phi_next"]), _f64(tr["rewards"]), _f64(tr["nu0"]),
                 cfg.cartpole_gamma, cluster_ids=ids, on_ill_conditioned="warn")
  boot = F.poisson_bootstrap(key, _f64(tr["phi"]), _f64(tr["phi_next"]), _f64(tr["rewards"]),
                             jnp.ones(len(ids)), _f64(tr["nu0"]), cfg.cartpole_gamma,
                             num_boot=cfg.cartpole_boot, cluster_ids=jnp.asarray(ids),
                             num_clusters=int(ids.max()) + 1)
  return res, boot


def cartpole_rlds(cfg, key: jax.Array, data_dir: str) -> dict:
  """Section E (see the module doc). key is split into rollout, Monte-Carlo and bootstrap keys."""
  env, params = gymnax.make("CartPole-v1")
  max_steps = int(params.max_steps_in_episode)
  mu = D.linear_softmax_policy(D.CARTPOLE_WEIGHTS, cfg.cartpole_mu_temp)
  pi = D.linear_softmax_policy(D.CARTPOLE_WEIGHTS, cfg.cartpole_pi_temp)
  k1, k2, k3 = jax.random.split(key, 3)
  ro = D.rollout_gymnax(k1, env, params, mu, cfg.cartpole_episodes, max_steps)
  eps = D.rollouts_to_episodes(ro)
  back, bdir, io_s, same = _roundtrip(eps, data_dir)
  tr = D.episodes_to_transitions(back, D.poly_action_features, pi)
  res, boot = _fore_estimates(cfg, tr, k3)
  mc = (env, params)
  truth, truth_se = D.monte_carlo_value(k2, *mc, pi, cfg.cartpole_gamma,
                                        cfg.cartpole_mc_episodes, max_steps)
  mu_value, _ = D.monte_carlo_value(k2, *mc, mu, cfg.cartpole_gamma, cfg.cartpole_mc_episodes,
                                    max_steps)
  args = _padded_is_args(back, tr, cfg.cartpole_gamma)
  return dict(episodes=len(back), transitions=int(len(tr["cluster_ids"])),
              mean_length=float(ro["length"].mean()),
              roundtrip_identical=bool(same), rlds_write_read_s=io_s, builder_dir=bdir,
              truth=truth, truth_se=truth_se, behaviour_value=mu_value,
              fore=float(res.value), fore_se=float(res.se),
              fore_ci=[float(res.ci_low), float(res.ci_high)],
              fore_boot_ci=[float(boot["ci_low"]), float(boot["ci_high"])],
              cond_A=float(res.cond), ess=float(res.ess), frac_negative_w=float(res.frac_negative_w),
              WIS=float(B.wis(*args)), PDIS=float(B.pdis(*args)), WPDIS=float(B.wpdis(*args)))
