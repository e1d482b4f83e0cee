// Node broker accounts (docs/design.md §1): enroll a node with the least rights wire.go allows, revoke it.
export { enrollNode, revokeNode } from './nodeAccounts.ts';
export type { Enrolled, NodeAccountOptions, Revoked } from './nodeAccounts.ts';
export { nodePermissions, nodeRoutingKeys } from './nodePermissions.ts';
export type { TopicPermissions, VhostPermissions } from './nodePermissions.ts';
export { nodeIdPattern, validateNodeId, escapeRegex } from '../core/wire/nodeId.ts';
export { createManagementClient } from './managementClient.ts';
export type { ManagementClient, ManagementOptions } from './managementClient.ts';
