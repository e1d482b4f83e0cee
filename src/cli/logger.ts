import pino from 'pino';
import type { DestinationStream, Logger } from 'pino';
import type { Config } from '../app/config.ts';

// The logger of the commands that log (serve, demo, replay); imported only by them, so a read
// command never loads pino. ISO times: an operator reads them without converting
// epoch milliseconds, and they sort as text.
export const makeLogger = (level: Config['logLevel'], destination: DestinationStream = pino.destination(2)): Logger =>
  pino(
    {
      level,
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: ['signingKey', '*.signingKey', 'token', '*.token', 'req.headers.authorization'], censor: '[redacted]' },
    },
    destination,
  );
