"""The spine of a turn between the door and the adapter: the running turn (`job`), the dispatcher that drives
it through its attempt plan (`dispatcher`) with its deadlines (`watchdog`), what a settled turn amounts to
(`summary`, `result`), and token counting, which asks one adapter once (`counting`).

docs/internals.md ("The dispatcher") describes how a turn runs.
"""
