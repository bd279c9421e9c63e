"""Checked episode banks for BallastNet-v0 task v2: every episode finishable by the oracle.

BallastNet-v0 generates its episodes at reset (env.py); in task v2 nothing checks that the
stability target can be reached, and the true-clog v2 controller fails ~36% of the >= 2-blocked
episodes on direct10. `make_v2_bank` builds a bank the way episodes.make_bank does for
BallastHydro-v0 (task v1):

  1. Candidates come from the env's own generator (`reset_env` without a bank), so the plan /
     start heel and trim / clog law is the documented one.
  2. Stratified by #blocked: exactly quotas(n, p_blocked) episodes have b blocked edges (the
     documented law of #blocked holds in the bank whatever the rejections), each stratum filled
     from that stratum's candidates only.
  3. Finishable: `v2_oracle_check` runs the true-clog v2 controller (baselines.v2_greedy_policy,
     oracle=True) with noiseless soundings under the env's step limit and heel limit from each
     candidate's start; candidates it does not finish are rejected and counted.

The report gives per #blocked stratum the candidates checked, rejected and accepted (rejection
rate), and the regime mix (none / 1 blocked / >= 2 blocked / partial only) of the candidates
checked vs of the bank: within a stratum the oracle rejects some placements more than others
(e.g. partial clogs next to blocked pipes), so the mix inside a #blocked stratum can shift.
`with_v2_bank(env, params, n, seed)` returns params whose reset draws from the bank.
"""

from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl_suite.envs.ballast.env import BallastNet, EnvParams, NetBank
# One regime definition for both envs' banks (re-exported: callers read net_bank.regime_of).
from jaxrl_suite.envs.ballast.episodes import REGIMES, regime_of  # noqa: F401


def quotas(n: int, p: np.ndarray) -> np.ndarray:
  """Integer counts summing to n closest to n * p (largest remainder)."""
  raw = n * np.asarray(p, np.float64)
  q = np.floor(raw).astype(int)
  q[np.argsort(-(raw - q), kind="stable")[:n - q.sum()]] += 1
  return q


def make_draw(env: BallastNet, params: EnvParams) -> Callable[[jax.Array], NetBank]:
  """draw(keys [m]) -> NetBank of m candidates from the env's generator (jitted once)."""
  p0 = params.replace(bank=None)

  @jax.jit
  def draw(keys):
    _, s = jax.vmap(env.reset_env, in_axes=(0, None))(keys, p0)
    return NetBank(vol0=s.vol, target=s.target, m_heel0=s.m_heel0, m_trim0=s.m_trim0,
                   clog=s.clog, n_blocked=(s.clog <= 0).sum(-1).astype(jnp.int32))

  return draw


def v2_oracle_check(env: BallastNet, params: EnvParams, num_steps: int | None = None
                    ) -> Callable[[NetBank, int], np.ndarray]:
  """check(candidates, seed) -> bool[m]: the true-clog v2 controller (noiseless soundings)
  reaches the stability target from candidate i within the step limit (num_steps, default the
  env's) without crossing heel_max. One compile per candidate batch size."""
  from jaxrl_suite.envs.ballast import baselines as B  # local: baselines imports env
  from jaxrl_suite.envs.ballast.rollout import make_evaluate

  if env.task != "v2":
    raise ValueError(f"v2_oracle_check needs a task='v2' env, got task={env.task!r}")
  n_steps = int(params.max_steps_in_episode) if num_steps is None else int(num_steps)
  ev = make_evaluate(env, B.v2_greedy_policy, num_steps=n_steps)
  p = params.replace(reveal_clog=True, sigma_level=0.0, bank=None)
  vp = B.make_v2_params(p, oracle=True)

  @jax.jit
  def finished(cand: NetBank, keys):
    def one(row, key):   # a one-row bank: reset starts exactly at candidate `row`
      out = ev(p.replace(bank=jax.tree.map(lambda x: x[None], row)), vp, key[None])
      return out["success"][0]
    return jax.vmap(one)(cand, keys)

  def check(cand: NetBank, seed: int) -> np.ndarray:
    keys = jax.random.split(jax.random.PRNGKey(seed), cand.vol0.shape[0])
    return np.asarray(finished(cand, keys), bool)

  return check


def make_v2_bank(env: BallastNet, params: EnvParams, n: int = 1024, seed: int = 0,
                 check: Callable[[NetBank, int], np.ndarray] | None = None,
                 batch: int = 256, max_rounds: int = 32):
  """(NetBank [n], report) of v2 episodes the check accepts (default v2_oracle_check), with
  exactly quotas(n, params.p_blocked) episodes per #blocked stratum.

  Each round draws `batch` candidates from the generator and checks them (one batch shape: one
  compile); a stratum keeps accepted candidates until its quota is met. Raises ValueError naming
  the layout and stratum if a quota is not met after max_rounds rounds."""
  if env.task != "v2":
    raise ValueError(f"make_v2_bank needs a task='v2' env, got task={env.task!r}")
  draw = make_draw(env, params)
  check = v2_oracle_check(env, params) if check is None else check
  p_b = np.asarray(params.p_blocked, np.float64)
  want = quotas(n, p_b)
  got: list[list[dict]] = [[] for _ in want]
  stats = [{"n_blocked": b, "quota": int(q), "checked": 0, "rejected": 0}
           for b, q in enumerate(want)]
  # per stratum, regime counts of the candidates checked (a random sample of the generator's
  # law given #blocked, whatever the round) and partial-clog counts checked / accepted
  reg_chk = np.zeros((len(want), len(REGIMES)), int)
  part_chk = np.zeros(len(want), int)
  part_acc = np.zeros(len(want), int)
  key = jax.random.PRNGKey(seed)
  for r in range(max_rounds):
    if all(len(g) >= q for g, q in zip(got, want)):
      break
    cand = jax.device_get(draw(jax.random.split(jax.random.fold_in(key, r), batch)))
    nb = np.asarray(cand.n_blocked)
    need = np.array([b < len(want) and len(got[b]) < want[b] for b in nb])
    if not need.any():
      continue
    ok = check(cand, seed + 1000 * r)
    clog = np.asarray(cand.clog)
    reg = regime_of(clog)
    has_part = ((clog > 0) & (clog < 1)).any(-1)
    for i in np.flatnonzero(need):
      b = int(nb[i])
      if len(got[b]) >= want[b]:       # filled earlier in this round
        continue
      stats[b]["checked"] += 1
      reg_chk[b, reg[i]] += 1
      part_chk[b] += has_part[i]
      if ok[i]:
        got[b].append(jax.tree.map(lambda x, i=i: x[i], cand))
        part_acc[b] += has_part[i]
      else:
        stats[b]["rejected"] += 1
  for b, q in enumerate(want):
    if len(got[b]) < q:
      raise ValueError(f"{env.layout_name}: only {len(got[b])} of {q} v2 episodes with {b} "
                       f"blocked edges are finishable by the oracle after {max_rounds} rounds "
                       f"of {batch}; lower p_blocked or raise max_steps_in_episode")
  rows = [e for g, q in zip(got, want) for e in g[:q]]
  order = np.random.default_rng(seed).permutation(len(rows))
  bank = jax.tree.map(lambda *x: jnp.asarray(np.stack(x)), *[rows[i] for i in order])
  for b, st in enumerate(stats):
    st["accepted"] = st["quota"]
    st["rejection_rate"] = st["rejected"] / max(st["checked"], 1)
    st["with_partial_checked"] = float(part_chk[b] / max(st["checked"], 1))
    st["with_partial_accepted"] = float(part_acc[b] / max(len(got[b]), 1))
  checked = sum(st["checked"] for st in stats)
  w = want / max(n, 1)
  # the regime mix the bank would have without the check (stratum shares x each stratum's
  # checked candidates) vs the bank's: the shift the rejection causes
  unchecked = (w[:, None] * reg_chk / np.maximum(reg_chk.sum(1, keepdims=True), 1)).sum(0)
  reg_bank = np.bincount(regime_of(np.asarray(bank.clog)), minlength=len(REGIMES)) / max(n, 1)
  report = {
      "layout": env.layout_name, "task": "v2", "n": n, "p_blocked": p_b.tolist(),
      "max_steps": int(params.max_steps_in_episode), "strata": stats,
      "checked": checked, "rejected": sum(st["rejected"] for st in stats),
      "rejection_rate": sum(st["rejected"] for st in stats) / max(checked, 1),
      "regimes_unchecked": dict(zip(REGIMES, unchecked.tolist())),
      "regimes_bank": dict(zip(REGIMES, reg_bank.tolist()))}
  return bank, report


def with_v2_bank(env: BallastNet, params: EnvParams, n: int = 1024, seed: int = 0, **kw):
  """(params with a checked v2 bank, report): reset then draws only finishable episodes."""
  bank, report = make_v2_bank(env, params, n=n, seed=seed, **kw)
  return params.replace(bank=bank), report
