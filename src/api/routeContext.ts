import type { ApiDeps } from './deps.ts';
import type { NodeViews } from './nodeViews.ts';

/** What every route plugin is registered with: the API's dependencies and the node views built on them. */
export type RouteContext = Readonly<{ deps: ApiDeps; views: NodeViews }>;
