"""The simulated cluster: the `Broker` under test, and the crashes that happen to it.

Two kinds of crash:

- ``node-crash``: one node stops (`Broker.stop_node`): its connections drop, leadership of its
  partitions and coordinators moves to the other replicas, and the new coordinators load their
  state by replaying their logs; the node comes back after a while.
- ``cluster-restart``: the whole process dies: requests being handled stop where they are, the
  broker is closed, and a new `Broker` recovers everything (metadata, partition logs, producer
  state, coordinators) from the directory it left.
- ``power-loss``: as a restart, but the machine loses power: nothing the dying process writes
  lands, and the simulated disk (`shoal.sim.disk`) keeps only what was synced, with a torn or
  zeroed tail now and then. A failed fsync (the disk's ``fsync-error``) takes its log offline; the
  cluster is then restarted this way soon after, as an operator would.

Besides crashes, the wall clock now and then steps forward (``clock-jump``), a node is now and
then cut off from every client for a while (``network-partition``, in `SimNetwork`), and a
partition's leadership moves to another live node as an operator's reassignment moves it
(``leader-move``: of a data topic, or of ``__consumer_offsets`` or ``__transaction_state``, whose
coordinator then moves and replays its log on the new node).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from shoal.broker.broker import Broker
from shoal.sim.loop import SimLoop

if TYPE_CHECKING:
    import random

    from shoal.broker.config import BrokerConfig
    from shoal.sim.disk import SimDisk
    from shoal.sim.network import SimNetwork
    from shoal.sim.workload import WorkloadConfig


class SimCluster:
    """Holds the current `Broker` (a restart replaces it) and tells whoever watches it."""

    def __init__(self, config: BrokerConfig, nodes: int) -> None:
        self.config = config
        self.nodes = nodes
        self.broker = Broker(config, nodes)
        self.network: SimNetwork | None = None
        self.watchers: list[Callable[[Broker], None]] = []
        self.before_crash: list[Callable[[Broker, list[int]], None]] = []  # told which nodes are about to die
        self.disk: SimDisk | None = None
        # told, after a power cut, which partitions lost acknowledged data to a lying fsync
        self.after_power_cut: list[Callable[[Broker, list[str]], None]] = []
        self.before_move: list[Callable[[Broker, str, int], None]] = []  # told of a leadership move
        self.movable_topics: list[str] = []
        self._busy = asyncio.Lock()  # one crash or restart at a time
        self._repair: asyncio.Task[None] | None = None  # the restart after a failed fsync

    async def start(self) -> None:
        await self.broker.start()

    async def crash_node(self, node_id: int, down_s: float) -> None:
        network = self.network
        assert network is not None
        async with self._busy:
            broker = self.broker
            network.trace.fault("node-crash", f"node {node_id} stops for {down_s:.1f} s")
            for told in self.before_crash:
                told(broker, [node_id])
            network.node_stopped(node_id)
            await broker.stop_node(node_id)
            try:
                await asyncio.sleep(down_s)
            finally:
                if broker is self.broker and not broker.nodes[node_id].running:
                    await broker.start_node(node_id)
                    network.trace.emit(f"node {node_id} restarted")

    async def restart(self, down_s: float, *, power_loss: bool = False, why: str = "") -> None:
        """Kill the process (with ``power_loss``, the machine) and start a new one on the same
        directory."""
        network = self.network
        assert network is not None
        async with self._busy:
            if power_loss:
                network.trace.fault("power-loss", f"every node loses power for {down_s:.1f} s{why}")
            else:
                network.trace.fault("cluster-restart", f"every node stops for {down_s:.1f} s")
            for told in self.before_crash:
                told(self.broker, list(self.broker.node_ids))
            disk = self.disk if power_loss else None
            if disk is not None:
                disk.power_off()
            await asyncio.gather(*network.kill_all(), return_exceptions=True)
            await self.broker.close()
            broken = disk.power_cut() if disk is not None else []
            try:
                await asyncio.sleep(down_s)
            finally:  # even when the run ends meanwhile: the final checks need a broker
                self.broker = Broker(self.config, self.nodes)
                await self.broker.start()
                network.set_broker(self.broker)
                for watch in self.watchers:
                    watch(self.broker)
                if broken:  # before any request reaches the new broker
                    for hook in self.after_power_cut:
                        hook(self.broker, broken)
                network.trace.emit("cluster restarted")

    def jump_clock(self, ms: int) -> None:
        """The wall clock steps forward (an NTP correction); monotonic time does not move. Stored
        deadlines (sessions, transaction timeouts) come due early, as they would in Kafka."""
        assert self.network is not None
        loop = asyncio.get_running_loop()
        assert isinstance(loop, SimLoop)
        loop.jump_wall_clock(ms)
        self.network.trace.fault("clock-jump", f"wall clock +{ms} ms")

    async def move_leader(self, rng: random.Random) -> None:
        """Reassign one partition so that another live node leads it (AlterPartitionReassignments
        as the controller applies it)."""
        network = self.network
        assert network is not None
        async with self._busy:
            broker = self.broker
            topics = [t for t in self.movable_topics if t in broker.metadata.topics]
            live = [n for n in broker.node_ids if broker.nodes[n].running]
            if not topics or len(live) < 2:
                return
            topic = rng.choice(topics)
            p = rng.randrange(broker.metadata.topics[topic].num_partitions)
            state = broker.metadata.partition(topic, p)
            leader = rng.choice([n for n in live if n != state.leader])
            replicas = [leader] + [r for r in state.replicas if r != leader][:max(len(state.replicas) - 1, 0)]
            network.trace.fault("leader-move", f"{topic}-{p}: leader {state.leader} -> {leader}")
            for told in self.before_move:
                told(broker, topic, p)
            await broker.reassign(topic, p, replicas)

    def fsync_failed(self, path: str) -> None:
        """A log went offline: restart the machine soon (once, however many logs failed)."""
        if self._repair is None or self._repair.done():
            self._repair = asyncio.get_running_loop().create_task(self._restart_after_failure())

    async def _restart_after_failure(self) -> None:
        await asyncio.sleep(0.5)
        await self.restart(1.0, power_loss=True, why=" (restarted after a failed fsync)")

    async def all_up(self) -> None:
        """Every node running (a crash may have been cut short by the end of the run)."""
        if self._repair is not None:
            await self._repair
        async with self._busy:
            for node_id in self.broker.node_ids:
                if not self.broker.nodes[node_id].running:
                    await self.broker.start_node(node_id)

    async def crasher(self, rng: random.Random, config: WorkloadConfig) -> None:
        """Crash a node now and then (more rarely the whole cluster), step the wall clock, or cut
        a node off the network."""
        while True:
            await asyncio.sleep(rng.expovariate(1 / config.crash_every_s))
            down = rng.uniform(*config.down_s)
            roll = rng.random()
            if roll < config.clock_jump_share:
                self.jump_clock(rng.randint(500, 10_000))
                continue
            if roll < config.clock_jump_share + config.restart_share:
                await self.restart(down, power_loss=self.disk is not None and rng.random() < config.power_loss_share)
                continue
            if roll < config.clock_jump_share + config.restart_share + config.partition_share:
                assert self.network is not None
                self.network.isolate(rng.choice(self.broker.node_ids), down)
                continue
            if roll < config.clock_jump_share + config.restart_share + config.partition_share + config.move_share:
                await self.move_leader(rng)
                continue
            live = [n for n in self.broker.node_ids if self.broker.nodes[n].running]
            if len(live) >= 2:
                await self.crash_node(rng.choice(live), down)
