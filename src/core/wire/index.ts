export { aliveSchema, reportSchema, signedSchema, digestPattern, stringMap, port } from './schemas.ts';
export type { Alive, Report, Signed } from './schemas.ts';
export {
  parseAlive,
  parseReport,
  parseSigned,
  encodeSigned,
  encodeSignedBase64,
  encodeReport,
  encodeAlive,
  defaultWireLimits,
  jsonDepthExceeds,
  jsonShapeExceeds,
} from './parse.ts';
export type { WireLimits } from './parse.ts';
