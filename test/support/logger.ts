import pino from 'pino';

/** The logger tests pass in: silent unless LOG_LEVEL is set (`LOG_LEVEL=debug npm run test:only -- ingest`). */
export const logger = pino({ level: process.env['LOG_LEVEL'] ?? 'silent' });
