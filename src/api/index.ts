export { buildApp } from './buildApp.ts';
export type { ApiDeps, SendDeclaration, ProjectionStatus } from './deps.ts';
export { listen } from './listen.ts';
export { parseApiTokens, authorize, scopes } from './auth.ts';
export type { Scope, TokenTable, TokenEntry } from './auth.ts';
export { problemOf } from './problem.ts';
export type { Problem } from './problem.ts';
export type { RouteKind } from './routeOptions.ts';
export { headersFor } from './responseHeaders.ts';
