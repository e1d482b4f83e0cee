import type { FastifyInstance } from 'fastify';

// The socket, kept apart from buildApp so tests never need one.
export async function listen(app: FastifyInstance, port: number, host = '127.0.0.1'): Promise<string> {
  return app.listen({ port, host });
}
