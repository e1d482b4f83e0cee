export { aliveSchema, reportSchema, signedSchema, digestPattern } from './schemas.ts';
export type { Alive, Report, Signed } from './schemas.ts';
export {
  parseAlive,
  parseReport,
  parseSigned,
  encodeSigned,
  encodeReport,
  encodeAlive,
  defaultWireLimits,
  jsonDepthExceeds,
} from './parse.ts';
export type { WireLimits } from './parse.ts';
