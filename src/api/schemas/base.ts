import { z } from 'zod';

// What every schema file of the API shares: the registry the OpenAPI document is generated from,
// `named` to register a component, and the scalar shapes used across them.

// zod's global registry, because that is where `.describe()` puts descriptions: the document
// generator reads one registry for both ids and descriptions.
export const apiRegistry = z.globalRegistry;

export const named = <T extends z.ZodType>(id: string, schema: T, description?: string): T => {
  apiRegistry.add(schema, description === undefined ? { id } : { id, description });
  return schema;
};

export const digest = z.string().regex(/^[0-9a-f]{64}$/, 'a digest is 64 lowercase hex characters');
export const position = z.string().regex(/^\d{1,20}$/, 'a position is a decimal string');
export const iso = z.string().describe('ISO 8601 time');

// Node ids come from broker user names; only refuse what cannot be one. The router's parameter
// limit is the same number, so a longer id is a 414 and a shorter one reaches the schema.
export const maxNodeIdLength = 255;

export const resource = z.looseObject({ id: z.string().min(1), ports: z.array(z.number().int().min(1).max(65535)).optional() });
