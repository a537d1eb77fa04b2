"""The OpenStack provider's transport: how a call reaches the cloud, and nothing about what it asks.

* `connection.py`: the process's one urllib3 pool manager and its Keystone token
  (`keystone.py`: when to authenticate; `authenticate.py` and `clouds.py`: keystoneauth1
  and openstacksdk's clouds.yaml loader, each run in a short-lived child by `child.py`);
* `client.py`: `OpenStackClient`, every REST call of the process (throttle, Retry-After,
  read retries, metrics, error mapping, paging);
* `pacing.py`: the provider's one token bucket and its one per-key backoff;
* `rest.py`: the table-driven resource calls (one `Resource` description per collection,
  one generic create/read/update/delete/list).

The capabilities (`instances`, `routes`, `loadbalancer`) and `common` build on it; it imports
none of them.
"""
