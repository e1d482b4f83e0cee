import { ConvergeError } from '../core/errors.ts';

/** `10m`, `30s`, `1h`, `1500ms`, or a bare number of milliseconds: the durations flags take (rollout, wait). */
export function parseDuration(flag: string, text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (m === null)
    throw new ConvergeError('CONVERGE_ERR_USAGE', `--${flag} must be a duration like 30s, 10m, 1h or 1500ms, got ${JSON.stringify(text)}`);
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[(m[2] ?? 'ms') as 'ms' | 's' | 'm' | 'h'];
  return Math.round(Number(m[1]) * unit);
}
