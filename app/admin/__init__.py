"""Running the gateway for a team (docs/admin.md): admin keys, managed keys, teams and the audit log.

- `models.py`: the admin API's bodies (a key's and a team's fields);
- `store.py`: the admin tables in the ledger's database and the SQL both databases run; `sqlite_store.py` and
  `postgres_store.py` connect it;
- `service.py`: `Admin`: who is an admin, each change (with its audit entry), and the sync that makes a change
  count on every replica within `GATEWAY_ADMIN_SYNC_INTERVAL`.

The HTTP routes are `app/api/admin.py`. This room sits above the policy (it feeds `ClientKeys` the managed keys)
and below the gateway, which builds it.
"""
