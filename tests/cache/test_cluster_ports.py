"""The suite's Redis Cluster never hands two nodes the same port (its start depends on it)."""

from __future__ import annotations

from tests.redis_cluster import BUS_PORT_OFFSET, NODES, RedisClusterProcesses, _node_ports

PICKS = 50


def test_every_pick_of_node_ports_is_distinct_with_free_bus_ports_apart_from_them() -> None:
    for _ in range(PICKS):
        ports = _node_ports(NODES)
        buses = {port + BUS_PORT_OFFSET for port in ports}
        assert len(set(ports)) == NODES
        assert not buses & set(ports)
        assert max(buses) < 65536


def test_the_session_cluster_runs_one_node_per_distinct_port(
    redis_cluster: RedisClusterProcesses,
) -> None:
    ports = [node.port for node in redis_cluster.nodes]
    assert len(set(ports)) == NODES
