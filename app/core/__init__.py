"""The spine of a turn between the door and the adapter: the running turn (`job`: what its request fixes and its
progress), the dispatcher that drives it through its attempt plan (`dispatcher`) with its deadlines
(`watchdog`), the settled turn's record every observer and door reads (`settled`), and token counting, which
asks one adapter once (`counting`).

docs/internals.md ("The dispatcher") describes how a turn runs.
"""
