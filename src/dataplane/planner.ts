/**
 * The planner: which desired frontends are new or changed, which programmed
 * ones are no longer wanted, and which cannot be programmed at all. Pure: it
 * reads the reconciler's record of what it wrote (never a map) and the model's
 * frontends, and returns the plan; the reconciler allocates ids and slots for
 * it and writes it in make-before-break order (reconciler.ts).
 *
 * A frontend is unchanged when the model hands over the same object as last
 * time (the incremental model replaces the objects of a Service that changed
 * and keeps the others), so a sync of 10,000 Services with one changed looks
 * at the changed one's frontends only (with a hint) or costs one lookup per
 * unchanged frontend (without).
 */
import type { Backend, Frontend } from '../model/types.js';
import { servicePortKey } from '../model/types.js';
import { frontendKeyOf, svcKeyBuf, tableBackends } from './encode.js';
import { svcKeyOf, type FrontendState } from './reconciler-state.js';
import type { ApplyHint, SyncError } from './reconciler.js';

/** A desired frontend whose model object changed since the last apply (or that is new). */
export interface Change {
  feKey: string;
  fe: Frontend;
  /** The service map's key, encoded. */
  keyBuf: Buffer;
  /** What its table is built from (same family, weight above 0). */
  backends: Backend[];
  /** backends[i]'s id, filled in by the allocator. */
  ids: number[];
}

export interface FrontendPlan {
  changes: Change[];
  /** Programmed frontends no desired frontend claims: their entries go after the changes are written. */
  removed: [string, FrontendState][];
  /** Frontends that cannot be programmed as given (permanent: they wait for the objects to change). */
  errors: SyncError[];
}

/** What the planner reads of the reconciler's state. */
export interface PlannerView {
  readonly frontends: ReadonlyMap<string, FrontendState>;
  readonly bySvc: ReadonlyMap<string, ReadonlySet<string>>;
  /** Frontend key per model object: a memo (the key is a function of the object), kept across plans. */
  readonly feKeys: WeakMap<Frontend, string>;
}

/**
 * Plans one apply. Without a hint `all` is the whole desired state and every programmed frontend
 * not in it is removed; with one, only the hinted Services' frontends are looked at (those given by
 * hint.frontendsOf) and every other programmed frontend is taken as unchanged.
 */
export function planFrontends(cur: PlannerView, all: readonly Frontend[], hint?: ApplyHint): FrontendPlan {
  const errors: SyncError[] = [];
  const desired = new Map<string, Frontend>();
  const changes: Change[] = [];
  const frontends: readonly Frontend[] = hint ? [...hint.services].flatMap((k) => hint.frontendsOf(k)) : all;
  for (const fe of frontends) {
    let feKey = cur.feKeys.get(fe);
    if (feKey === undefined) {
      if (fe.protocol === 'SCTP') {
        errors.push({ servicePort: servicePortKey(fe.servicePort), reason: 'protocol SCTP is not supported by the socket LB', permanent: true });
        continue;
      }
      feKey = frontendKeyOf(fe);
      cur.feKeys.set(fe, feKey);
    }
    // Another Service's (unchanged) frontend holds this key: it stays theirs.
    const held = hint ? cur.frontends.get(feKey) : undefined;
    const other = desired.get(feKey) ?? (held?.fe && !hint!.services.has(svcKeyOf(held.servicePort)) ? held.fe : undefined);
    if (other) {
      errors.push({ frontend: feKey, servicePort: servicePortKey(fe.servicePort), reason: `frontend also claimed by ${servicePortKey(other.servicePort)}`, permanent: true });
      continue;
    }
    desired.set(feKey, fe);
    if (cur.frontends.get(feKey)?.fe === fe) continue;
    const backends = tableBackends(fe);
    changes.push({ feKey, fe, keyBuf: svcKeyBuf(fe), backends, ids: new Array<number>(backends.length) });
  }
  const removed: [string, FrontendState][] = [];
  if (hint) {
    for (const k of hint.services) {
      for (const feKey of cur.bySvc.get(k) ?? []) if (!desired.has(feKey)) removed.push([feKey, cur.frontends.get(feKey)!]);
    }
  } else for (const e of cur.frontends) if (!desired.has(e[0])) removed.push(e);
  return { changes, removed, errors };
}
