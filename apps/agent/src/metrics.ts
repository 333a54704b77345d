import { Counter, Gauge } from 'prom-client';

/**
 * The agent's own series on its opt-in /metrics (HTTP_PORT > 0), beside the process metrics
 * every service exports. Created once per process: NATS sessions come and go, the series stay.
 */
export const heartbeatsTotal = new Counter({
  name: 'tern_agent_heartbeats_total',
  help: 'Heartbeats by outcome: sent, skipped (NATS down), failed (not acknowledged).',
  labelNames: ['outcome'],
});

export const containersGauge = new Gauge({
  name: 'tern_agent_containers',
  help: 'Containers this agent looks after.',
});

export const containerEventsTotal = new Counter({
  name: 'tern_agent_container_events_total',
  help: 'Container lifecycle events published, by event (starting, started, ready, failed, stopped).',
  labelNames: ['event'],
});

export const networkThroughput = new Gauge({
  name: 'tern_agent_network_throughput_mbps',
  help: 'Throughput measured by the last network test, by path (nats, http); 0 when the leg failed.',
  labelNames: ['path'],
});

export const networkLatency = new Gauge({
  name: 'tern_agent_network_latency_ms',
  help: 'Round-trip latency measured by the last network test, by path (nats, http).',
  labelNames: ['path'],
});
