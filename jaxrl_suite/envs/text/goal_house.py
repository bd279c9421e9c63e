r"""GoalHouse-v0: an ALFWorld-like text house where the goal is stated once ("put X in Y").

World (sizes are static fields of `EnvParams`; defaults 6 rooms, 8 receptacles, 8 objects):
  rooms r = 0..R-1, receptacles c = 0..C-1 (receptacle c stands in room c mod R, closed at
  reset), objects o = 0..O-1, each placed in a uniformly random receptacle. The goal (X, Y):
  X uniform, Y uniform among receptacles that do not already hold X. The agent starts in a
  random room, holds at most one object, and has `max_steps` actions (default 30).

Names are capital letters: rooms A.., then receptacles, then objects (R + C + O <= 26), e.g. with
the defaults rooms A-F, receptacles G-N, objects O-V.

Observations (`TextObs`, tokenizer v2; `obs_len` = 12 with the defaults):
  reset      <task> <goal> X <in> Y <room> r : c c ...     the ONLY time the goal is shown
  go r       <obs> <room> r : c c ...                       lists the room's receptacles
  open c     <obs> c : o o ... | <obs> c : <no>             contents (stays open); <obs> <no> if
                                                            c is not in the current room
  take o     <obs> <hold> o | <obs> <no>                    o must lie in an opened receptacle here
  put o c    <obs> <yes> | <obs> <done> | <obs> <no>        <done>: X is in Y (reward 1, terminal)
  note X Y   <obs> <yes>                                    the agent restates the goal into its
                                                            own context; no state change, no hint
Actions (<eoa>-terminated, `max_action_len` = 5): `<go> r`, `<open> c`, `<take> o`,
`<put> o <in> c`, `<note> o <in> c`. A block that does not parse is invalid (`error_obs`).

Why the house is built this way: a rollout harness that keeps only the last W tokens of the
history loses the goal after a few turns, so "trajectory neglect" happens for real (the agent
takes the wrong object, puts into the wrong receptacle, re-opens searched receptacles) unless it
used `<note>` while the goal was still visible; and at the start X is hidden in one of several
closed receptacles, so many states have several equally good actions (benign high entropy).

Discrete action index (`parse_action`, `action_tokens`, masks), A = R + C + O + O*C + 1:
  go r: r | open c: R + c | take o: R + C + o | put o c: R + C + O + o*C + c | note: A - 1

`info` of a step (all about the PRE-action state s_t, in which the action was chosen):
  state_key  int32   hash of (room, held object, set of opened receptacles, X-found flag)
  neglect    bool[4] ground-truth N1..N4 labels of the action (`neglect_labels`)
  optimal    bool    the action is optimal for the true goal (`optimal_mask`)
  action_index int32 (-1 if invalid), invalid bool, success bool
"""

from __future__ import annotations

from typing import Any

import chex
import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import spaces

from jaxrl_suite.envs.text import base
from jaxrl_suite.envs.text import tokenizer

V = tokenizer.V2
_T = {n: V.id(n) for n in ("<task>", "<goal>", "<in>", "<room>", "<obs>", "<no>", "<yes>",
                           "<done>", "<hold>", "<go>", "<open>", "<take>", "<put>", "<note>",
                           "<eoa>", ":")}
_A = V.id("A")
NUM_LABELS = 4
LABEL_NAMES = ("N1_wrong_take", "N2_wrong_put", "N3_research", "N4_other_goal")


@struct.dataclass
class EnvParams:
  num_rooms: int = struct.field(pytree_node=False, default=6)
  num_receptacles: int = struct.field(pytree_node=False, default=8)
  num_objects: int = struct.field(pytree_node=False, default=8)
  max_steps: int = struct.field(pytree_node=False, default=30)
  success_reward: float = 1.0
  step_reward: float = 0.0  # per action (a cost if negative)


@struct.dataclass
class EnvState:
  room: jax.Array       # int32 []
  held: jax.Array       # int32 [] object id, -1 if empty-handed
  loc: jax.Array        # int32 [O] receptacle of each object, -1 if held
  opened: jax.Array     # bool [C]
  goal_obj: jax.Array   # int32 []
  goal_rec: jax.Array   # int32 []
  time: jax.Array       # int32 []
  done: jax.Array       # bool [] success reached


def num_actions(p: EnvParams) -> int:
  return p.num_rooms + p.num_receptacles + p.num_objects + p.num_objects * p.num_receptacles + 1


def receptacle_room(p: EnvParams) -> jax.Array:
  return jnp.arange(p.num_receptacles) % p.num_rooms


def _letters(p: EnvParams):
  """Token ids of room, receptacle and object names."""
  r0, c0 = _A, _A + p.num_rooms
  o0 = c0 + p.num_receptacles
  return r0, c0, o0


def found(state: EnvState, obj: jax.Array) -> jax.Array:
  """Whether the agent has seen / holds `obj` (receptacles stay open once opened and only the
  agent moves objects, so 'seen' = held or lying in an opened receptacle)."""
  at = state.loc[obj]
  return (state.held == obj) | ((at >= 0) & state.opened[jnp.maximum(at, 0)])


def state_key(state: EnvState, p: EnvParams) -> jax.Array:
  """int32 key of (room, held, opened set, X-found): GiGPO's anchor state / STAPO's state κ."""
  bits = (state.opened.astype(jnp.int32) << jnp.arange(p.num_receptacles)).sum()
  k = state.room
  k = k + p.num_rooms * (state.held + 1)
  k = k + p.num_rooms * (p.num_objects + 1) * found(state, state.goal_obj).astype(jnp.int32)
  k = k + p.num_rooms * (p.num_objects + 1) * 2 * bits
  return k.astype(jnp.int32)


def num_state_keys(p: EnvParams) -> int:
  return p.num_rooms * (p.num_objects + 1) * 2 * (2 ** p.num_receptacles)


# ---- actions ----------------------------------------------------------------------------------

def parse_action(action: jax.Array, p: EnvParams) -> tuple[jax.Array, jax.Array, jax.Array]:
  """(index int32 [], valid bool [], note goal (obj, rec) int32 [2]) of an action block [L]."""
  r0, c0, o0 = _letters(p)
  R, C, O = p.num_rooms, p.num_receptacles, p.num_objects
  n = base.action_length(action, _T["<eoa>"])
  a = jnp.concatenate([action, jnp.zeros((5,), action.dtype)])[:5]
  room, rec, obj = a[1] - r0, a[1] - c0, a[1] - o0
  rec3 = a[3] - c0
  is_room = (room >= 0) & (room < R)
  is_rec, is_obj = (rec >= 0) & (rec < C), (obj >= 0) & (obj < O)
  is_rec3 = (rec3 >= 0) & (rec3 < C)
  two = (n == 2) & (a[2] == _T["<eoa>"])
  four = (n == 4) & (a[2] == _T["<in>"]) & (a[4] == _T["<eoa>"]) & is_obj & is_rec3
  put_idx = R + C + O + obj * C + rec3
  cases = [
      (two & (a[0] == _T["<go>"]) & is_room, room),
      (two & (a[0] == _T["<open>"]) & is_rec, R + rec),
      (two & (a[0] == _T["<take>"]) & is_obj, R + C + obj),
      (four & (a[0] == _T["<put>"]), put_idx),
      (four & (a[0] == _T["<note>"]), jnp.int32(num_actions(p) - 1)),
  ]
  valid = jnp.zeros((), bool)
  idx = jnp.int32(-1)
  for ok, i in cases:
    idx = jnp.where(ok & ~valid, i, idx)
    valid = valid | ok
  note = jnp.stack([jnp.where(is_obj, obj, -1), jnp.where(is_rec3, rec3, -1)]).astype(jnp.int32)
  return idx.astype(jnp.int32), valid, note


def action_tokens(index: jax.Array, p: EnvParams, note_goal: jax.Array | None = None
                  ) -> jax.Array:
  """The token block int32 [5] of a discrete action (inverse of `parse_action`).

  `note_goal` (obj, rec) is what a `<note>` restates (default: objects 0 and receptacle 0)."""
  r0, c0, o0 = _letters(p)
  R, C, O = p.num_rooms, p.num_receptacles, p.num_objects
  e, pad = _T["<eoa>"], tokenizer.PAD
  note_goal = jnp.zeros((2,), jnp.int32) if note_goal is None else note_goal
  k = index - (R + C + O)
  put_o, put_c = k // C, k % C
  go = jnp.stack([_T["<go>"], r0 + index, e, pad, pad])
  op = jnp.stack([_T["<open>"], c0 + index - R, e, pad, pad])
  tk = jnp.stack([_T["<take>"], o0 + index - R - C, e, pad, pad])
  pt = jnp.stack([_T["<put>"], o0 + put_o, _T["<in>"], c0 + put_c, e])
  nt = jnp.stack([_T["<note>"], o0 + note_goal[0], _T["<in>"], c0 + note_goal[1], e])
  branch = ((index >= R).astype(jnp.int32) + (index >= R + C) + (index >= R + C + O)
            + (index >= num_actions(p) - 1))
  out = jnp.stack([go, op, tk, pt, nt])[branch]
  return out.astype(jnp.int32)


# ---- optimal actions and neglect labels -------------------------------------------------------

def optimal_mask(state: EnvState, obj: jax.Array, rec: jax.Array, p: EnvParams) -> jax.Array:
  """bool [A]: the actions on some shortest plan for goal (obj, rec) given what the agent knows.

    holding obj:        go room(rec) -> open rec -> put obj rec
    holding another o:  put o into any opened receptacle here, else open one here
    obj seen (found):   go to its room -> take obj
    obj unfound:        open any closed receptacle here; if none, go to any room with one
  Several actions are often optimal (benign high entropy). `<note>` is never in the mask.
  """
  R, C, O = p.num_rooms, p.num_receptacles, p.num_objects
  rroom = receptacle_room(p)
  here = rroom == state.room                              # [C]
  closed_here = here & ~state.opened
  open_here = here & state.opened
  go = jnp.zeros((R,), bool)
  op = jnp.zeros((C,), bool)
  tk = jnp.zeros((O,), bool)
  pt = jnp.zeros((O, C), bool)
  onehot_r = lambda r: jnp.arange(R) == r  # noqa: E731
  onehot_c = lambda c: jnp.arange(C) == c  # noqa: E731

  # holding the goal object
  h_go = jnp.where(rroom[rec] != state.room, onehot_r(rroom[rec]), False)
  h_op = jnp.where((rroom[rec] == state.room) & ~state.opened[rec], onehot_c(rec), False)
  h_pt = jnp.where((rroom[rec] == state.room) & state.opened[rec],
                   (jnp.arange(O) == obj)[:, None] & onehot_c(rec)[None], False)
  # holding another object
  heldi = jnp.maximum(state.held, 0)
  any_open_here = open_here.any()
  o_pt = jnp.where(any_open_here, (jnp.arange(O) == heldi)[:, None] & open_here[None], False)
  o_op = jnp.where(any_open_here, False, closed_here)
  # goal object seen
  at = jnp.maximum(state.loc[obj], 0)
  f_go = jnp.where(rroom[at] != state.room, onehot_r(rroom[at]), False)
  f_tk = jnp.where(rroom[at] == state.room, jnp.arange(O) == obj, False)
  # goal object unfound
  closed_rooms = jnp.zeros((R,), bool).at[rroom].max(~state.opened)
  u_op = closed_here
  u_go = jnp.where(closed_here.any(), False, closed_rooms & (jnp.arange(R) != state.room))

  holding_goal = state.held == obj
  holding_other = (state.held >= 0) & ~holding_goal
  seen = found(state, obj)
  go = jnp.select([holding_goal, holding_other, seen], [h_go, go, f_go], u_go)
  op = jnp.select([holding_goal, holding_other, seen], [h_op, o_op, op], u_op)
  tk = jnp.select([holding_goal, holding_other, seen], [tk, tk, f_tk], tk)
  pt = jnp.select([holding_goal, holding_other], [h_pt, o_pt], pt)
  return jnp.concatenate([go, op, tk, pt.reshape(-1), jnp.zeros((1,), bool)])


def neglect_labels(state: EnvState, index: jax.Array, p: EnvParams) -> jax.Array:
  """bool [4] ground-truth neglect labels of action `index` taken in `state` (false if -1):

    N1 take(o) with o != X
    N2 put(o, c) with (o, c) != (X, Y), unless the put is optimal for the true goal (dropping a
       wrongly taken object into an open receptacle here is the repair, not more neglect)
    N3 while X is unfound: open(c) of a receptacle already opened (searched), or go(r) to another
       room whose receptacles are all already opened
    N4 the action is optimal for some other goal (o, c) != (X, Y) but not for (X, Y)
  """
  R, C, O = p.num_rooms, p.num_receptacles, p.num_objects
  valid = index >= 0
  opt = optimal_mask(state, state.goal_obj, state.goal_rec, p)
  i = jnp.maximum(index, 0)
  is_take = (i >= R + C) & (i < R + C + O)
  is_put = (i >= R + C + O) & (i < num_actions(p) - 1)
  k = i - (R + C + O)
  put_o, put_c = k // C, k % C
  n1 = is_take & (i - R - C != state.goal_obj)
  n2 = is_put & ((put_o != state.goal_obj) | (put_c != state.goal_rec)) & ~opt[i]
  unfound = ~found(state, state.goal_obj)
  is_open = (i >= R) & (i < R + C)
  is_go = i < R
  reopen = is_open & state.opened[jnp.clip(i - R, 0, C - 1)]
  rroom = receptacle_room(p)
  room_closed = jnp.zeros((R,), bool).at[rroom].max(~state.opened)
  revisit = is_go & (i != state.room) & ~room_closed[jnp.clip(i, 0, R - 1)]
  n3 = unfound & (reopen | revisit)
  objs, recs = jnp.meshgrid(jnp.arange(O), jnp.arange(C), indexing="ij")
  objs, recs = objs.reshape(-1), recs.reshape(-1)
  other = (objs != state.goal_obj) | (recs != state.goal_rec)
  masks = jax.vmap(lambda o, c: optimal_mask(state, o, c, p)[i])(objs, recs)
  n4 = (masks & other).any() & ~opt[i]
  return jnp.stack([n1, n2, n3, n4]) & valid


# ---- observations -----------------------------------------------------------------------------

def _compact(ids: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
  """The ids where mask is true, moved to the front (order kept); (ids [n], count [])."""
  pos = jnp.where(mask, jnp.cumsum(mask) - 1, ids.shape[0])
  out = jnp.zeros((ids.shape[0] + 1,), jnp.int32).at[pos].set(ids.astype(jnp.int32))
  return out[:-1], mask.sum().astype(jnp.int32)


def _block(prefix: list, ids: jax.Array, mask: jax.Array, empty_token, obs_len: int):
  """prefix tokens + compacted listing (or `empty_token` if nothing) as a TextObs."""
  lst, n = _compact(ids, mask)
  pre = jnp.stack([jnp.asarray(t, jnp.int32) for t in prefix])
  if empty_token is not None:
    lst = jnp.where(n == 0, jnp.zeros_like(lst).at[0].set(empty_token), lst)
    n = jnp.maximum(n, 1)
  toks = jnp.concatenate([pre, lst])
  return base.make_obs(toks, len(prefix) + n, obs_len)


def _fixed(tokens: list, obs_len: int) -> base.TextObs:
  return base.make_obs(jnp.stack([jnp.asarray(t, jnp.int32) for t in tokens]), len(tokens),
                       obs_len)


class GoalHouse(base.TextEnvironment):
  """GoalHouse-v0 (see the module docstring). Shapes follow the static fields of EnvParams."""

  max_action_len = 5

  def __init__(self, params: EnvParams | None = None):
    super().__init__()
    p = params or EnvParams()
    if p.num_rooms + p.num_receptacles + p.num_objects > 26:
      raise ValueError("EnvParams: num_rooms + num_receptacles + num_objects must be <= 26 "
                       f"(letters A..Z), got {p.num_rooms + p.num_receptacles + p.num_objects}")
    for f in ("num_rooms", "num_receptacles", "num_objects", "max_steps"):
      if getattr(p, f) < 1:
        raise ValueError(f"EnvParams.{f} must be >= 1, got {getattr(p, f)}")
    if p.num_receptacles < 2:
      raise ValueError("EnvParams.num_receptacles must be >= 2 (Y must differ from X's place)")
    self._shape_params = p
    per_room = -(-p.num_receptacles // p.num_rooms)
    self.obs_len = max(8 + per_room, 3 + p.num_objects)

  @property
  def default_params(self) -> EnvParams:
    return self._shape_params

  @property
  def name(self) -> str:
    return "GoalHouse-v0"

  @property
  def num_actions(self) -> int:
    return num_actions(self._shape_params)

  def state_key(self, state: EnvState, params: EnvParams) -> jax.Array:
    """The decision-state key (see `state_key`), used by the rollout for same-state groups."""
    return state_key(state, params)

  def _room_obs(self, prefix, room, p):
    _, c0, _ = _letters(p)
    recs = jnp.arange(p.num_receptacles)
    return _block(prefix + [_A + room, _T[":"]], c0 + recs, receptacle_room(p) == room, None,
                  self.obs_len)

  def reset_env(self, key: chex.PRNGKey, params: EnvParams):
    k_loc, k_obj, k_rec, k_room = jax.random.split(key, 4)
    C, O = params.num_receptacles, params.num_objects
    loc = jax.random.randint(k_loc, (O,), 0, C)
    goal_obj = jax.random.randint(k_obj, (), 0, O)
    # Y uniform among the receptacles other than X's: shift a draw from C-1 past X's place.
    y = jax.random.randint(k_rec, (), 0, C - 1)
    goal_rec = jnp.where(y >= loc[goal_obj], y + 1, y)
    room = jax.random.randint(k_room, (), 0, params.num_rooms)
    state = EnvState(room=room, held=jnp.int32(-1), loc=loc.astype(jnp.int32),
                     opened=jnp.zeros((C,), bool), goal_obj=goal_obj.astype(jnp.int32),
                     goal_rec=goal_rec.astype(jnp.int32), time=jnp.int32(0),
                     done=jnp.zeros((), bool))
    _, c0, o0 = _letters(params)
    obs = self._room_obs([_T["<task>"], _T["<goal>"], o0 + goal_obj, _T["<in>"], c0 + goal_rec,
                          _T["<room>"]], room, params)
    return obs, state

  def step_env(self, key: chex.PRNGKey, state: EnvState, action: jax.Array, params: EnvParams):
    del key
    index, valid, _ = parse_action(action, params)
    obs, new_state, reward, success = self.transition(state, index, params)
    obs = jax.tree.map(lambda e, o: jnp.where(valid, o, e), self.error_obs(), obs)
    new_state = jax.tree.map(lambda s, n: jnp.where(valid, n, s), state, new_state)
    new_state = new_state.replace(time=state.time + 1)
    reward = jnp.where(valid & success, params.success_reward, 0.0) + params.step_reward
    terminated = valid & success
    info = {"state_key": state_key(state, params),
            "neglect": neglect_labels(state, jnp.where(valid, index, -1), params),
            "optimal": valid & optimal_mask(state, state.goal_obj, state.goal_rec,
                                            params)[jnp.maximum(index, 0)],
            "action_index": jnp.where(valid, index, -1), "invalid": ~valid,
            "success": terminated}
    return obs, new_state, reward.astype(jnp.float32), terminated, info

  def is_truncated(self, state: EnvState, params: EnvParams) -> jax.Array:
    return (state.time >= params.max_steps) & ~state.done

  def is_terminated(self, state: EnvState, params: EnvParams) -> jax.Array:
    return state.done

  def transition(self, state: EnvState, index: jax.Array, p: EnvParams):
    """(obs, state, reward, success) of a parsed action index (>= 0)."""
    R, C, O = p.num_rooms, p.num_receptacles, p.num_objects
    _, c0, o0 = _letters(p)
    rroom = receptacle_room(p)
    i = jnp.maximum(index, 0)
    no = _fixed([_T["<obs>"], _T["<no>"]], self.obs_len)
    yes = _fixed([_T["<obs>"], _T["<yes>"]], self.obs_len)
    # go
    r = jnp.clip(i, 0, R - 1)
    go_obs = self._room_obs([_T["<obs>"], _T["<room>"]], r, p)
    go_state = state.replace(room=r)
    # open
    c = jnp.clip(i - R, 0, C - 1)
    can_open = rroom[c] == state.room
    open_obs = _block([_T["<obs>"], c0 + c, _T[":"]], o0 + jnp.arange(O), state.loc == c,
                      _T["<no>"], self.obs_len)
    open_obs = jax.tree.map(lambda a, b: jnp.where(can_open, a, b), open_obs, no)
    open_state = state.replace(opened=state.opened.at[c].set(state.opened[c] | can_open))
    # take
    o = jnp.clip(i - R - C, 0, O - 1)
    at = jnp.maximum(state.loc[o], 0)
    can_take = (state.held < 0) & (state.loc[o] >= 0) & state.opened[at] & (
        rroom[at] == state.room)
    take_obs = jax.tree.map(lambda a, b: jnp.where(can_take, a, b),
                            _fixed([_T["<obs>"], _T["<hold>"], o0 + o], self.obs_len), no)
    take_state = state.replace(held=jnp.where(can_take, o, state.held),
                               loc=jnp.where(can_take, state.loc.at[o].set(-1), state.loc))
    # put
    k = jnp.clip(i - R - C - O, 0, O * C - 1)
    po, pc = k // C, k % C
    can_put = (state.held == po) & state.opened[pc] & (rroom[pc] == state.room)
    success_put = can_put & (po == state.goal_obj) & (pc == state.goal_rec)
    put_obs = jax.tree.map(
        lambda a, b, d: jnp.where(success_put, d, jnp.where(can_put, a, b)), yes, no,
        _fixed([_T["<obs>"], _T["<done>"]], self.obs_len))
    put_state = state.replace(held=jnp.where(can_put, -1, state.held),
                              loc=jnp.where(can_put, state.loc.at[po].set(pc), state.loc))
    branch = ((i >= R).astype(jnp.int32) + (i >= R + C) + (i >= R + C + O)
              + (i >= num_actions(p) - 1))
    pick = lambda *xs: jax.tree.map(lambda *ys: jnp.stack(ys)[branch], *xs)  # noqa: E731
    obs = pick(go_obs, open_obs, take_obs, put_obs, yes)
    new_state = pick(go_state, open_state, take_state, put_state, state)
    success = (branch == 3) & success_put
    return obs, new_state.replace(done=state.done | success), success.astype(jnp.float32), success

  def action_mask(self, state: EnvState, params: EnvParams | None = None) -> jax.Array:
    """All discrete actions are always legal (failures are outcomes); bool [A] of ones."""
    return jnp.ones((num_actions(params or self.default_params),), bool)

  def observation_space(self, params=None):
    return spaces.Dict({
        "tokens": spaces.Box(0, self.vocab.size - 1, (self.obs_len,), jnp.int32),
        "length": spaces.Discrete(self.obs_len + 1),
    })


def make_goal_house(**overrides: Any):
  """Registry factory: (GoalHouse env, EnvParams) with keyword overrides of EnvParams."""
  params = EnvParams(**overrides)
  return GoalHouse(params), params


# ---- scripted policies (warm-start data, tests) ----------------------------------------------

def expert_action(key: chex.PRNGKey, state: EnvState, p: EnvParams, note_prob: float = 0.0,
                  noise: float = 0.0) -> jax.Array:
  """A discrete action index: uniform over the optimal actions for the true goal; with
  probability `note_prob` a correct `<note>`; with probability `noise` a uniform random action."""
  k1, k2, k3, k4 = jax.random.split(key, 4)
  opt = optimal_mask(state, state.goal_obj, state.goal_rec, p)
  a_opt = jax.random.categorical(k1, jnp.where(opt, 0.0, -1e9))
  a_rand = jax.random.randint(k2, (), 0, num_actions(p) - 1)
  a = jnp.where(jax.random.uniform(k3) < noise, a_rand, a_opt)
  return jnp.where(jax.random.uniform(k4) < note_prob, num_actions(p) - 1, a).astype(jnp.int32)


def goal_of(state: EnvState) -> jax.Array:
  return jnp.stack([state.goal_obj, state.goal_rec]).astype(jnp.int32)


def scripted_episodes(key: chex.PRNGKey, num: int, p: EnvParams, note_prob: float = 0.0,
                      noise: float = 0.0, env: "GoalHouse | None" = None) -> dict:
  """`num` episodes of `expert_action` (jittable), per turn t < max_steps:

    obs [N, T, obs_len] / obs_len [N, T]  the observation the action answers (t=0: the task)
    act [N, T, 5] / act_len [N, T]        the action block and its length including <eoa>
    valid [N, T], success [N], neglect [N, T, 4]
  `noise` may be a per-episode array [N] (a mixture of clean and noisy demonstrations).
  """
  env = env or GoalHouse(p)
  noise = jnp.broadcast_to(jnp.asarray(noise, jnp.float32), (num,))
  k_reset, k_act = jax.random.split(key)
  obs, state = jax.vmap(env.reset, in_axes=(0, None))(jax.random.split(k_reset, num), p)

  def one(obs, state, done, k, eps):
    ka, ks = jax.random.split(k)
    a = expert_action(ka, state, p, note_prob, eps)
    toks = action_tokens(a, p, goal_of(state))
    obs2, state2, r, term, info = env.step_env(ks, state, toks, p)
    out = dict(obs=obs.tokens, obs_len=obs.length, act=toks,
               act_len=base.action_length(toks, _T["<eoa>"]) + 1, valid=~done,
               success=term & ~done, neglect=info["neglect"] & ~done)
    done2 = done | term | env.is_truncated(state2, p)
    return obs2, state2, done2, out

  def body(carry, t):
    obs, state, done = carry
    ks = jax.vmap(jax.random.fold_in, in_axes=(0, None))(jax.random.split(k_act, num), t)
    obs, state, done, out = jax.vmap(one)(obs, state, done, ks, noise)
    return (obs, state, done), out

  _, out = jax.lax.scan(body, (obs, state, jnp.zeros((num,), bool)), jnp.arange(p.max_steps))
  out = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), out)
  out["success"] = out["success"].any(1)
  return out
