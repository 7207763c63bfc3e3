"""Who may call and what they may do now: client keys (`keyring`, `keys`), per-key limits and spend (`limits`,
with the stores `memory_store` and `redis_store` behind the `store` protocol) and the one ordered admission
pipeline the gateway runs before a stream starts (`admission`). The refusal kinds are part of the contract
(`app.contract.limit_kinds`, `app.contract.refusals`).

docs/limits.md ("Adding a policy") says where a new policy goes.
"""
