"""What each revenue manager may see: the information parity of the RM baselines (issue #38).

An RL train agent observes public fares and its own inventory and sales only. A fair RM baseline
therefore forecasts, for a train of operator o, from what operator o can observe:

  "operator" (default)  o's own trains' bookings and seats, every train's published fare; the
                        other operators' remaining seats are not observed, so their trains are
                        taken as open (`seen_remaining`), and the hidden per-episode demand
                        shock is re-estimated from o's own bookings only (`forecast.shock_hat`,
                        with `EnvState.nominal_op_cum`: o's expected bookings at shock 1 under
                        o's own view of availability).
  "pooled"              every operator's bookings and seats (the pre-#38 baselines): an upper
                        reference for what shared information is worth, reported separately,
                        never the "best RM baseline" an RL result is compared with.

Both modes use the scenario's demand model (market sizes, booking curves, MNL coefficients), the
parameters an RM system estimates from its history; neither sees the per-episode shock
(`baselines.cdlp_known` is the separate, labelled information benchmark that does).

`EnvParams.information` holds the index into INFORMATION_MODES (a traced int, so one compiled
policy serves both modes).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

INFORMATION_MODES = ("operator", "pooled")


def information_index(value) -> int:
  """"operator"/"pooled" (or its index) -> index; a ValueError that names the valid modes."""
  if isinstance(value, str):
    if value not in INFORMATION_MODES:
      raise ValueError(f"RailRM-v0: information={value!r} is not one of {INFORMATION_MODES} "
                       "(EnvParams.information; see envs/rail/information.py)")
    return INFORMATION_MODES.index(value)
  return value


def same_operator(operator: jax.Array) -> jax.Array:
  """[A, A] 1.0 where trains i and j belong to the same operator."""
  return (operator[:, None] == operator[None, :]).astype(jnp.float32)


def seen_remaining(remaining: jax.Array, capacity: jax.Array, operator: jax.Array,
                   information) -> jax.Array:
  """[A_obs, A, NL]: the remaining seats of train j as the operator of train i sees them.

  Operator view: own operator's trains exact, other operators' trains at full capacity (their
  sales are not observed, so a sold-out rival looks open). Pooled view: exact for all."""
  own = same_operator(operator)[..., None] > 0
  op_view = jnp.where(own, remaining[None], capacity[None])
  pooled = jnp.broadcast_to(remaining[None], op_view.shape)
  return jnp.where(jnp.asarray(information) == 0, op_view, pooled)
