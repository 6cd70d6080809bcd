// Structured JSON logs (pino), one line per event, written synchronously so
// that nothing is lost when the agent exits or is killed right after.
import { pino, type Logger } from 'pino';

export type { Logger };
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export function createLogger(level: LogLevel, fd = 1): Logger {
  return pino({ level, base: { component: 'svcmap-agent' } }, pino.destination({ fd, sync: true }));
}
