import { join } from 'node:path';
import { pino, type Logger as Pino } from 'pino';
import { createLogger } from '#tern/observability';
import { type AgentState } from './state/agent-state.js';

export interface AgentLogOptions {
  level: string;
  format: 'auto' | 'json' | 'pretty';
  /** The dashboard owns the terminal: log to <state dir>/agent.log instead. */
  dashboard: boolean;
  stateDir: string;
  state: AgentState;
}

const LEVELS: Record<number, 'info' | 'warn' | 'error'> = { 30: 'info', 40: 'warn', 50: 'error', 60: 'error' };

/**
 * Off a terminal the agent logs JSON lines like every Tern service. Under the dashboard the
 * same records go to agent.log, and info and above also feed the dashboard's event list.
 */
export function createAgentLogger(opts: AgentLogOptions): Pino {
  if (!opts.dashboard) return createLogger({ service: 'agent', level: opts.level, format: opts.format });
  const file = pino.destination({ dest: join(opts.stateDir, 'agent.log'), mkdir: true, sync: false });
  const events = {
    write(line: string) {
      try {
        const record = JSON.parse(line) as { level: number; msg?: string; time?: string };
        const level = LEVELS[record.level];
        if (level && record.msg) opts.state.addEvent(level, record.msg, record.time ? Date.parse(record.time) : Date.now());
      } catch {
        /* not a record */
      }
    },
  };
  return pino(
    { level: opts.level, base: { service: 'agent', pid: process.pid }, timestamp: pino.stdTimeFunctions.isoTime },
    pino.multistream([
      { level: opts.level as pino.Level, stream: file },
      { level: 'info', stream: events },
    ]),
  );
}
