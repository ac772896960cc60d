"""A cell's topology: its nodes (servers), the links between them and the client, and an optional proxy.

    nodes.py      NodeSpec: one server of a topology (name, role, address, port, filesystem, namespace)
    network.py    network namespaces joined by veth pairs, netem delay per link, measured round trips
    proxies/      proxies in front of the nodes (haproxy; ProxySQL from a user's binary)

What is particular to a server family (how a replica follows its primary, how a Galera node joins, which
status numbers tell the lag) lives in engines/, behind each family's cluster module (engines.cluster:
start_cluster).
"""
