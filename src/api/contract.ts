/**
 * The API's answers as TypeScript types, derived from the JSON Schemas the
 * routes serve and validate with (schemas.ts): one definition, read by
 * fastify (validation, serialisation, the OpenAPI document) and by the typed
 * client the CLI uses (client.ts). A field the schema does not declare is
 * dropped on the wire and is not in these types either.
 */
import type { FromSchema } from 'json-schema-to-ts';
import type * as S from './schemas.js';

export type StatusResponse = FromSchema<typeof S.statusResponse>;
export type ServicesResponse = FromSchema<typeof S.servicesResponse>;
export type BackendsResponse = FromSchema<typeof S.backendsResponse>;
export type MaglevResponse = FromSchema<typeof S.maglevResponse>;
export type DriftResponse = FromSchema<typeof S.driftResponse>;
export type StatsResponse = FromSchema<typeof S.statsResponse>;
export type ErrorResponse = FromSchema<typeof S.errorSchema>;
