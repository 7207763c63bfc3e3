"""Pools of deployments (CONTRACT §9b, docs/pools.md): one route served by several provider entries (keys,
regions, clouds), balanced per turn by the pool's strategy, with cooldowns, quotas, latency estimates and
conversation affinity kept per process or, with Redis, shared by every replica.

- `state.py`: what is known of each deployment and the per-process store (`MemoryPoolStore`);
- `redis_store.py`: the same in Redis, one atomic Lua script per step (`RedisPoolStore`);
- `choice.py`: the order a turn tries the deployments in, by strategy;
- `balancer.py`: `Pools`, what the dispatcher calls: acquire a deployment, finish or cool it.
"""
