"""The flags the manager and the workers both take, and the values they parse.

Below the process layers and the bus protocol (a leaf: standard library only, zmq loaded
lazily for CURVE certificates), so any layer can read the same flag the same way:

    addresses.py            --runtime-dir, --bus-*: where the bus lives, its CURVE keys
    cluster_id.py           --cluster-id
    durations.py            Go durations (10s, 1m30s), for flags and cloud.conf keys
    load_balancer_class.py  --load-balancer-class[-only]: which Services a tree claims
"""
