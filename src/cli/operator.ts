import { userInfo } from 'node:os';
import type { Context } from './command.ts';

/** Who a command is recorded as having been given by: `cli <user>` (a rollout's startedBy, a hold's by). */
export function who(ctx: Pick<Context, 'io'>): string {
  let user = ctx.io.env.USER ?? ctx.io.env.USERNAME;
  if (user === undefined) {
    try {
      user = userInfo().username;
    } catch {
      user = 'unknown';
    }
  }
  return `cli ${user}`;
}
