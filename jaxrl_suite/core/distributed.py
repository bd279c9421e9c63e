"""Scale-out with JAX sharding: a `Mesh`, `NamedSharding`s and jitted steps with explicit
in/out shardings (what older code called `pjit`, deprecated since JAX 0.8).

Layout: the environment / batch axis of every array whose leading dimension is the batch size is
sharded over the mesh axis `data`; everything else (parameters, optimiser state, PRNG keys,
counters) is replicated. XLA's SPMD partitioner inserts the collectives, so the sharded step
computes the same numbers as the single-device step (up to float reduction order).

Multi-host (several machines, each with its accelerators): call, on every host, before anything
else touches JAX:

    jax.distributed.initialize(coordinator_address="host0:1234", num_processes=N, process_id=i)

(on Cloud TPU and SLURM the arguments are discovered automatically: `jax.distributed.initialize()`).
`jax.devices()` then lists the devices of all hosts and `make_mesh()` spans them; each host feeds
its own shard of the batch (`jax.make_array_from_process_local_data`). No custom launcher is needed:
start the same command on every host.

On CPU, tests emulate 8 devices with XLA_FLAGS=--xla_force_host_platform_device_count=8 set
before JAX is imported.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

DATA = "data"


def make_mesh(num_devices: int | None = None, axis: str = DATA) -> Mesh:
  """A 1-D mesh over the first `num_devices` devices (all by default)."""
  devices = jax.devices()
  n = len(devices) if num_devices is None else num_devices
  if not 1 <= n <= len(devices):
    raise ValueError(f"num_devices={n} but only {len(devices)} devices are visible")
  return Mesh(np.asarray(devices[:n]), (axis,))


def data_sharding(mesh: Mesh, axis: str = DATA) -> NamedSharding:
  """Shards the leading axis over `axis`."""
  return NamedSharding(mesh, P(axis))


def replicated(mesh: Mesh) -> NamedSharding:
  return NamedSharding(mesh, P())


def batch_shardings(tree: Any, mesh: Mesh, batch_size: int, axis: str = DATA) -> Any:
  """Per-leaf shardings: leaves whose leading dim is `batch_size` are sharded, others replicated.

  `batch_size` must be divisible by the mesh size along `axis`.
  """
  n = mesh.shape[axis]
  if batch_size % n:
    raise ValueError(f"batch size {batch_size} is not divisible by the {n} devices of mesh axis "
                     f"{axis!r}; choose num_envs as a multiple of {n}")
  shard, rep = data_sharding(mesh, axis), replicated(mesh)

  def pick(x):
    shape = getattr(x, "shape", ())
    return shard if len(shape) >= 1 and shape[0] == batch_size else rep

  return jax.tree.map(pick, tree)


def shard_batch(tree: Any, mesh: Mesh, batch_size: int, axis: str = DATA) -> Any:
  """Places `tree` on the mesh with `batch_shardings`."""
  return jax.device_put(tree, batch_shardings(tree, mesh, batch_size, axis))


def jit_sharded(fn: Callable, mesh: Mesh, in_shardings: Any, out_shardings: Any,
                donate_argnums: tuple[int, ...] = ()) -> Callable:
  """`jax.jit` with explicit in/out shardings (the modern spelling of pjit)."""
  del mesh  # The shardings carry the mesh; the argument documents intent at call sites.
  return jax.jit(fn, in_shardings=in_shardings, out_shardings=out_shardings,
                 donate_argnums=donate_argnums)


def sharded_update(update: Callable, example_state: Any, mesh: Mesh, batch_size: int,
                   axis: str = DATA) -> Callable:
  """Jits `update(state) -> (state, metrics)` with the env batch sharded and the rest replicated.

  `example_state` fixes the pytree structure (e.g. `learner.init(key)`); metrics are replicated.
  """
  state_sh = batch_shardings(example_state, mesh, batch_size, axis)
  _, metrics_shape = jax.eval_shape(update, example_state)
  metrics_sh = jax.tree.map(lambda _: replicated(mesh), metrics_shape)
  return jit_sharded(update, mesh, (state_sh,), (state_sh, metrics_sh))
